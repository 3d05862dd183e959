package lua

import (
	"strings"
	"testing"
	"time"
)

// alert_park keeps at most its cap of alerts, replaces one parked again,
// and refuses unusable arguments without writing.
func TestPark(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	k, err := NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	key := k.Parked()
	park := func(id, data string) Parking {
		t.Helper()
		p, err := s.Park(ctx, key, id, []byte(data), 2, time.Hour)
		if err != nil {
			t.Fatalf("park %s: %v", id, err)
		}
		return p
	}
	steps := []struct {
		id, data string
		want     Parking
	}{
		{"r/e1", "one", Parked},
		{"r/e2", "two", Parked},
		{"r/e3", "three", ParkFull},
		{"r/e1", "one again", ParkedAgain}, // already parked: replaced, not a new one
	}
	for _, st := range steps {
		if got := park(st.id, st.data); got != st.want {
			t.Errorf("park %s: %v, want %v", st.id, got, st.want)
		}
	}
	got, err := s.Parked(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["r/e1"] != "one again" || got["r/e2"] != "two" {
		t.Errorf("parked: %v", got)
	}
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("the parked hash lives %v, want an hour", ttl)
	}
	if err := s.Unpark(ctx, key, "r/e1", "r/e2"); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Error("unparking every alert left the hash")
	}

	for _, bad := range []struct {
		name, id, data string
		limit          int
		life           time.Duration
	}{
		{"empty id", "", "x", 10, time.Hour},
		{"id too long", strings.Repeat("i", 257), "x", 10, time.Hour},
		{"no data", "r/e", "", 10, time.Hour},
		{"data too long", "r/e", strings.Repeat("d", 65537), 10, time.Hour},
		{"no cap", "r/e", "x", 0, time.Hour},
		{"cap too large", "r/e", "x", 1000001, time.Hour},
		{"no lifetime", "r/e", "x", 10, 0},
	} {
		if _, err := s.Park(ctx, key, bad.id, []byte(bad.data), bad.limit, bad.life); err == nil {
			t.Errorf("%s: parked", bad.name)
		}
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Error("a refused park wrote the hash")
	}
}

// Leases are taken by one caller at a time, each key on its own.
func TestLease(t *testing.T) {
	s, _, prefix := newScripts(t)
	ctx := t.Context()
	a, b := prefix+":lease:a", prefix+":lease:b"
	got, err := s.Lease(ctx, time.Minute, a)
	if err != nil || len(got) != 1 || !got[0] {
		t.Fatalf("first lease of a: %v, %v", got, err)
	}
	got, err = s.Lease(ctx, time.Minute, a, b)
	if err != nil || len(got) != 2 || got[0] || !got[1] {
		t.Fatalf("a again and b: %v, %v; want a held by another, b taken", got, err)
	}
	if err := s.Release(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	got, err = s.Lease(ctx, time.Minute, a, b)
	if err != nil || !got[0] || !got[1] {
		t.Fatalf("after release: %v, %v; want both taken", got, err)
	}
}

// Crossed reads back what a counting script marked, and nothing else.
func TestCrossed(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := testWindow(prefix, "marks", time.Minute, 2)
	c := &Count{Source: "p0", Offsets: offsetsOf(w), Windows: []Window{w}}
	for off, id := range []string{"e1", "e2", "e3"} {
		c.Changes = append(c.Changes, Change{Window: 0, Offset: int64(off), ID: IDOf(id), Amount: 1})
	}
	b := s.Batch()
	if err := b.Count(c); err != nil {
		t.Fatal(err)
	}
	if err := b.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		id        string
		wantValue int64
		want      bool
	}{
		{"e1", 0, false},
		{"e2", 2, true}, // the crossing
		{"e3", 0, false},
		{"never-seen", 0, false},
	} {
		v, ok, err := s.Crossed(ctx, w.Marks, IDOf(tt.id))
		if err != nil || ok != tt.want || v != tt.wantValue {
			t.Errorf("%s: %d, %v, %v; want %d, %v", tt.id, v, ok, err, tt.wantValue, tt.want)
		}
	}
	// Something else wrote the marks: not a mark the scripts write.
	for _, bad := range []string{"x", "-1", "1e3", "99999999999999999999"} {
		id := IDOf("bad-" + bad)
		rdb.HSet(ctx, w.Marks, string(id[:]), bad)
		if v, ok, err := s.Crossed(ctx, w.Marks, id); err != nil || ok {
			t.Errorf("mark %q: %d, %v, %v; want no crossing", bad, v, ok, err)
		}
	}
}
