package model

import (
	"bytes"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// An alert's seal (lua.Scripts.Seal, plain HSET and EXPIRE NX) leaves the
// same marks in the model as in Redis, beside a crossing's mark and where
// the marks are gone, and the crossing's redelivery reads its mark as
// before: a replay that crosses thresholds runs on the model.
func TestSealAsRedis(t *testing.T) {
	p := newPair(t)
	keys := []string{p.key("o"), p.key("w"), p.key("w:crossed")}
	cross := func() {
		p.call(lua.IncrAndCheckName, keys, "p:0", "600", "1", "600", "2", "1", "1", ids[0], "1", "1", "2", ids[1], "1")
	}
	cross()
	real, err := lua.New(lua.Config{}, p.rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	modelled, err := lua.New(lua.Config{}, p.st.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	gone := p.key("gone:crossed")
	p.used[gone] = true
	seals := []lua.Seal{
		{Marks: keys[2], ID: lua.EventID([]byte(ids[1])), Hash: bytes.Repeat([]byte{7}, 32), At: time.UnixMilli(1_700_000_000_000)},
		{Marks: keys[2], ID: lua.EventID([]byte(ids[1])), Hash: bytes.Repeat([]byte{8}, 32), At: time.UnixMilli(1_700_000_000_001)},
		{Marks: gone, ID: lua.EventID([]byte(ids[0])), Hash: bytes.Repeat([]byte{9}, 32), At: time.UnixMilli(1_700_000_000_002)},
	}
	for _, s := range []*lua.Scripts{real, modelled} {
		if err := s.Seal(t.Context(), "", seals); err != nil {
			t.Fatal(err)
		}
	}
	p.same("the seals")
	cross() // the redelivery, compared
}
