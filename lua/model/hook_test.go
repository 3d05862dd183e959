package model

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
)

// HGETALL, which the engine sends in a pipeline to read the evidence of a
// crossing (lua.Scripts.CounterEvidence), answers through the hook as
// Redis does, alone and in a pipeline: a counter's fields, an empty map
// without a key, and WRONGTYPE, a Redis error, on a key of another type;
// and CounterEvidence reads the same entries from both.
func TestHGetAllAsRedis(t *testing.T) {
	p := newPair(t)
	ctx := t.Context()
	keys := []string{p.key("o"), p.key("w0"), p.key("w0:crossed")}
	ws := []entryWindow{{600, 3, 1, 5}}
	var cs []entryChange
	for off, e := range []string{"first", "second", "third", "past"} {
		cs = append(cs, entryChange{window: 1, offset: int64(off + 1), inc: 1, id: ids[off], entry: e})
	}
	p.raw(lua.IncrAndCheckName, keys, packEntryCall("p:0", ws, cs, true)...)
	seedValue(p, "string", "5\x1ea", 300*time.Second)
	seedHash(p, "foreign", 300*time.Second, "c", "x", "12", "twelve", "y", "z")
	var names []string
	for _, n := range []string{"w0", "none", "string", "foreign", "o"} {
		names = append(names, p.key(n))
	}
	client := p.st.Client()
	defer client.Close()

	for _, k := range names {
		want, wantErr := p.rdb.HGetAll(ctx, k).Result()
		got, gotErr := client.HGetAll(ctx, k).Result()
		sameHGetAll(t, k, want, got, wantErr, gotErr)
	}

	realPipe, modelPipe := p.rdb.Pipeline(), client.Pipeline()
	var wants, gots []*redis.MapStringStringCmd
	for _, k := range names {
		wants = append(wants, realPipe.HGetAll(ctx, k))
		gots = append(gots, modelPipe.HGetAll(ctx, k))
	}
	_, realErr := realPipe.Exec(ctx)
	_, modelErr := modelPipe.Exec(ctx)
	if fmt.Sprint(realErr) != fmt.Sprint(modelErr) {
		t.Errorf("a pipeline: Redis's error %v, the model's %v", realErr, modelErr)
	}
	for i, k := range names {
		sameHGetAll(t, k+" (in a pipeline)", wants[i].Val(), gots[i].Val(), wants[i].Err(), gots[i].Err())
	}

	real, err := lua.New(lua.Config{}, p.rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	modelled, err := lua.New(lua.Config{}, client, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, wantErr := real.CounterEvidence(ctx, names)
	got, gotErr := modelled.CounterEvidence(ctx, names)
	if wantErr != nil || gotErr != nil || fmt.Sprint(want) != fmt.Sprint(got) {
		t.Errorf("CounterEvidence: Redis %q, %v; the model %q, %v", want, wantErr, got, gotErr)
	}
	if fmt.Sprint(got[0]) != "[third second first]" {
		t.Errorf("CounterEvidence of the window: %q, want its three entries, highest count first", got[0])
	}
}

// sameHGetAll fails the test unless the model answered key's HGETALL as
// Redis did: the same map (never nil) or the same Redis error.
func sameHGetAll(t *testing.T, key string, want, got map[string]string, wantErr, gotErr error) {
	t.Helper()
	var realReply, modelReply redis.Error
	switch {
	case wantErr != nil || gotErr != nil:
		if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) || !errors.As(wantErr, &realReply) || !errors.As(gotErr, &modelReply) {
			t.Errorf("HGETALL %s: Redis's error %v (%T), the model's %v (%T)", key, wantErr, wantErr, gotErr, gotErr)
		}
	case got == nil:
		t.Errorf("HGETALL %s: a nil map, where Redis's is %v", key, want)
	case hashText(want) != hashText(got):
		t.Errorf("HGETALL %s:\nRedis %q\nmodel %q", key, hashText(want), hashText(got))
	}
}
