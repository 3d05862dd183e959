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
