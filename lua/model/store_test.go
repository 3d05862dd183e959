package model

import (
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/fraudwatch/fraudwatch/lua"
)

// Keys expire as Redis expires them, at their due time exactly, whether a
// step of the clock or a read finds them first; a key re-armed since it was
// queued lives to its new time.
func TestStoreExpiresKeysWhenDue(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		// steps moves the clock, then asks whether the key exists.
		steps []time.Duration
		want  []bool
		rearm time.Duration // when > 0: the key is armed again at this time, for 60 s
	}{
		{"just before, then at its time", []time.Duration{59*time.Second + 999*time.Millisecond, 60 * time.Second}, []bool{true, false}, 0},
		{"one step past it", []time.Duration{2 * time.Minute}, []bool{false}, 0},
		{"re-armed: lives to the new time", []time.Duration{30 * time.Second, 60 * time.Second, 89 * time.Second, 90 * time.Second},
			[]bool{true, true, true, false}, 30 * time.Second},
		{"a clock moved back stays", []time.Duration{30 * time.Second, 10 * time.Second, 60 * time.Second}, []bool{true, true, false}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t0)
			if err := s.hset("k", "v", "1"); err != nil {
				t.Fatal(err)
			}
			s.expire("k", time.Minute)
			for i, step := range tc.steps {
				s.SetTime(t0.Add(step))
				if tc.rearm > 0 && step == tc.rearm {
					s.expire("k", time.Minute)
				}
				// Through alive, which reads no key, and exists, which does.
				if got := s.alive() == 1; got != tc.want[i] {
					t.Errorf("at %v: alive says %v, want %v", step, got, tc.want[i])
				}
				if got := s.exists("k"); got != tc.want[i] {
					t.Errorf("at %v: exists %v, want %v", step, got, tc.want[i])
				}
			}
		})
	}
}

// A step deletes the keys due, so that a long replay holds only the keys
// alive; and a key set again after it was queued is not deleted by its old
// entry.
func TestStoreDropsKeysDueAtAStep(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := New(t0)
	for _, k := range []string{"a", "b", "c", "r"} {
		s.setEx(k, "x", time.Minute)
	}
	s.setEx("long", "x", time.Hour)
	s.SetTime(t0.Add(30 * time.Second))
	s.setEx("b", "y", time.Minute) // a new value, due later
	s.expire("r", time.Minute)     // re-armed, due later
	s.SetTime(t0.Add(60 * time.Second))
	if len(s.keys) != 3 || s.keys["b"] == nil || s.keys["r"] == nil || s.keys["long"] == nil {
		t.Errorf("at a minute the store holds %d keys, want b, r and long", len(s.keys))
	}
	s.SetTime(t0.Add(90 * time.Second))
	if len(s.keys) != 1 || s.due.Len() != 1 {
		t.Errorf("at 90 s: %d keys, %d queued; want long alone", len(s.keys), s.due.Len())
	}
}

// Each body follows the code of the script the lua package runs: a script
// whose code changed needs its body changed to match, its tests run, and
// its pin in followed updated; a comment edit needs neither
// (lua.TestFingerprintIsOfTheCode).
func TestModelFollowsTheScripts(t *testing.T) {
	if err := Follows(); err != nil {
		t.Error(err)
	}
}

// A body whose pin is not its script's code is not run: its script's
// EVALSHA fails and says why, and Follows fails.
func TestModelRefusesAScriptItNoLongerFollows(t *testing.T) {
	sha, _ := lua.SHA(lua.IncrAndCheckName)
	if _, ok := scripts[sha]; !ok {
		t.Fatalf("the model does not answer incr_and_check: %v", stale[sha])
	}
	saved := followed[lua.IncrAndCheckName]
	t.Cleanup(func() { followed[lua.IncrAndCheckName] = saved })
	followed[lua.IncrAndCheckName] = struct {
		pin  string
		body script
	}{"0000000000000000000000000000000000000000", saved.body}
	if err := Follows(); err == nil || !strings.Contains(err.Error(), lua.IncrAndCheckName) {
		t.Errorf("Follows with a stale pin: %v, want incr_and_check named", err)
	}
	answered, why := index()
	if _, ok := answered[sha]; ok || why[sha] == nil {
		t.Errorf("a script the model no longer follows is answered (why not: %v)", why[sha])
	}
	if len(answered) != len(followed)-1 {
		t.Errorf("the model answers %d scripts, want the %d others", len(answered), len(followed)-1)
	}
}

// The heap of due keys under a replay's load: each step sets one key of
// 4,096 again with a TTL of 1 to 300 s, and every 8 steps the clock moves a
// second, dropping the keys due by then.
func BenchmarkStoreExpiry(b *testing.B) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := New(t0)
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.setEx(keys[i%len(keys)], "x", time.Duration(1+i%300)*time.Second)
		s.SetTime(t0.Add(time.Duration(i/8) * time.Second))
	}
}

// What the store keeps it copies: a call's keys and arguments are
// substrings of larger strings (a batch's key names, a call's packing),
// and a key, field, value or member kept as one of them would keep all of
// it alive for as long as the window lives.
func TestStoreKeepsNoneOfItsArguments(t *testing.T) {
	big := strings.Repeat("x", 1<<16) + "key|field|value|member|str"
	sub := func(s string) string { i := strings.Index(big, s); return big[i : i+len(s)] }
	within := func(s string) bool {
		p, b := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(big)))
		return p >= b && p < b+uintptr(len(big))
	}
	s := New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	if _, err := s.hsetField(sub("key"), sub("field"), sub("value")); err != nil {
		t.Fatal(err)
	}
	if err := s.hset(sub("str")+"h", sub("field"), sub("value")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.hincrby(sub("str"), sub("field"), 1); err != nil {
		t.Fatal(err)
	}
	s.setEx(sub("value"), sub("member"), time.Minute)
	s.setEx(sub("field"), "12\x1eentry", time.Minute)
	if _, ok := s.upgrade(sub("field")); !ok {
		t.Fatal("a string counter was not upgraded")
	}
	if _, err := s.zadd(sub("member")+"z", sub("member"), 1, false); err != nil {
		t.Fatal(err)
	}
	for k, e := range s.keys {
		if within(k) || within(e.str) {
			t.Errorf("key %q or its value is a substring of an argument", k)
		}
		for f, v := range e.hash {
			if within(f) || within(v) {
				t.Errorf("field %q of %q or its value is a substring of an argument", f, k)
			}
		}
		if e.zset != nil {
			for m := range e.zset.scores {
				if within(m) {
					t.Errorf("member %q of %q is a substring of an argument", m, k)
				}
			}
		}
	}
}
