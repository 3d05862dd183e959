package silence_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// newStore is a silence store on a real Redis, with its client and keys.
func newStore(t *testing.T) (*silence.Store, redis.UniversalClient, lua.Keys) {
	t.Helper()
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := lua.NewKeys(redistest.Prefix(t))
	if err != nil {
		t.Fatal(err)
	}
	return silence.NewStore(rdb, scripts, keys), rdb, keys
}

// A silence Redis refuses leaves no trace: not in the index that silence
// list and the status page read, not in any bucket a claim reads. The
// error says why, and names no key and no value (errors reach logs).
func TestRefusedSilencesLeaveNothing(t *testing.T) {
	ctx := t.Context()
	now := time.Now()
	for _, tt := range []struct {
		name  string
		match map[string]string
		full  func(keys lua.Keys) string // the silences hash filled to 100
		want  string
	}{
		{"the 101st of a group", map[string]string{"customer_id": "cust-9\u00e9"},
			func(k lua.Keys) string { return k.Silences(k.Group([]string{"cust-9\u00e9"}), "burst") },
			"this group of rule burst already holds 100 silences"},
		// One bucket of 256 refuses; the 255 that took it give it back.
		{"the 101st of a whole rule", nil,
			func(k lua.Keys) string { return k.AllRuleSilences("burst")[17] },
			"rule burst already holds 100 silences of the whole rule"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store, rdb, keys := newStore(t)
			full := tt.full(keys)
			for i := range 100 {
				rdb.HSet(ctx, full, fmt.Sprint("old-", i), now.Add(time.Hour).UnixMilli())
			}
			_, err := store.Add(ctx, testRules, silence.Spec{Rule: "burst", Match: tt.match, For: time.Hour, Reason: "r"}, now)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, lua.ErrInvalidArguments) {
				t.Fatalf("Add = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), full) || strings.Contains(err.Error(), "cust-9") {
				t.Errorf("the error names the key or the value: %v", err)
			}
			if list, err := store.List(ctx, now); err != nil || len(list) != 0 {
				t.Errorf("List = %+v, %v; want nothing", list, err)
			}
			for _, k := range append(keys.AllRuleSilences("burst"), full) {
				if n := rdb.HLen(ctx, k).Val(); k != full && n != 0 || k == full && n != 100 {
					t.Fatalf("%s holds %d silences after the refusal", k, n)
				}
			}
		})
	}
}

// --for shorter than a second is refused before anything is written, and
// says what is wrong.
func TestSilenceTooShort(t *testing.T) {
	store, _, _ := newStore(t)
	for _, d := range []time.Duration{time.Nanosecond, 999 * time.Millisecond} {
		_, err := store.Add(t.Context(), testRules, silence.Spec{Rule: "burst", For: d, Reason: "r"}, time.Now())
		if !errors.Is(err, silence.ErrUsage) || !strings.Contains(err.Error(), "--for must be at least 1s and at most 8760h0m0s, got "+d.String()) {
			t.Errorf("--for %v: %v", d, err)
		}
	}
	if list, _ := store.List(t.Context(), time.Now()); len(list) != 0 {
		t.Errorf("listed %+v", list)
	}
}

// A silence whose end has passed by Redis's clock when it is written (this
// machine's clock behind Redis's) is refused as such, and leaves nothing.
// miniredis, for its clock can be set.
func TestSilenceEndedByRedisClock(t *testing.T) {
	mr := miniredis.RunT(t)
	now := time.Now()
	mr.SetTime(now.Add(2 * time.Hour))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := lua.NewKeys("fw")
	store := silence.NewStore(rdb, scripts, keys)
	_, err = store.Add(t.Context(), testRules, silence.Spec{Rule: "burst", Match: map[string]string{"customer_id": "c"}, For: time.Hour, Reason: "r"}, now)
	if err == nil || !strings.Contains(err.Error(), "already past by Redis's clock") || !strings.Contains(err.Error(), "is this machine's clock behind?") {
		t.Fatalf("Add = %v", err)
	}
	if list, _ := store.List(t.Context(), now); len(list) != 0 {
		t.Errorf("listed %+v", list)
	}
}

// silence list shows values from event data (a group's, a reason) without
// anything a terminal would act on: an escape sequence that sets the
// window's title, a newline that would forge a row, a bidi override. JSON
// keeps them exact.
func TestListTextIsPrintable(t *testing.T) {
	store, _, _ := newStore(t)
	now := time.Now()
	hostile := "c\x1b]0;pwned\x07-1\nfake-id  rule burst\u202egpj.exe"
	if _, err := store.Add(t.Context(), testRules, silence.Spec{Rule: "burst", Match: map[string]string{"customer_id": hostile},
		For: time.Hour, Reason: "why\x1b[2J" + hostile, Author: "k\u202eim\x07"}, now); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c := silence.Command{Name: "list", Rules: testRules, Out: &out, Now: now}
	if err := silence.Run(t.Context(), store, c); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.ContainsAny(text, "\x1b\x07\u202e") || strings.Count(text, "\n") != 2 {
		t.Errorf("list printed %q: want a header and one row, nothing a terminal acts on", text)
	}
	if !strings.Contains(text, "customer_id=c ]0;pwned -1 fake-id  rule burstgpj.exe") {
		t.Errorf("list printed %q", text)
	}
	out.Reset()
	c.Format = "json"
	if err := silence.Run(t.Context(), store, c); err != nil {
		t.Fatal(err)
	}
	var list []silence.Silence
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list) != 1 || list[0].Match["customer_id"] != hostile || list[0].Author != "k\u202eim\x07" {
		t.Errorf("list --format json: %+v, %v; want the values exact", list, err)
	}
}

// A silence of a group named by its encoding (a Slack button's) shows the
// values it carries only if they make that group: values of one group
// over another's encoding are refused, and nothing is written; values that
// make it, plainly or hashed, and none at all, are taken.
func TestShownValuesMustMakeTheGroup(t *testing.T) {
	ctx := t.Context()
	long := strings.Repeat("x", 300) // hashed
	for _, tt := range []struct {
		name  string
		rule  string
		group []string // the values whose group the silence names
		match map[string]string
		ok    bool
	}{
		{"the group's own values", "burst", []string{"victim"}, map[string]string{"customer_id": "victim"}, true},
		{"no values shown", "burst", []string{"victim"}, nil, true},
		{"another group's values", "burst", []string{"victim"}, map[string]string{"customer_id": "mallory"}, false},
		{"a long group's own values", "burst", []string{long}, map[string]string{"customer_id": long}, true},
		{"values cut for display", "burst", []string{long}, map[string]string{"customer_id": long[:100] + "…"}, false},
		{"a field the rule does not group by", "burst", []string{"victim"}, map[string]string{"email": "victim"}, false},
		{"values in group_by's order", "pair", []string{"a@x", "555"}, map[string]string{"phone": "555", "email": "a@x"}, true},
		{"values swapped between fields", "pair", []string{"a@x", "555"}, map[string]string{"phone": "a@x", "email": "555"}, false},
		{"a value missing", "pair", []string{"a@x", "555"}, map[string]string{"email": "a@x"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store, rdb, keys := newStore(t)
			g := keys.Group(tt.group)
			sil, err := store.Add(ctx, testRules, silence.Spec{Rule: tt.rule, Group: g.Encoding(), Match: tt.match,
				For: time.Hour, Reason: "snoozed from Slack", Author: "slack:U1"}, time.Now())
			if tt.ok {
				if err != nil || sil.Group != g.Encoding() {
					t.Fatalf("Add = %+v, %v; want the group silenced", sil, err)
				}
				return
			}
			if !errors.Is(err, silence.ErrUsage) || !strings.Contains(err.Error(), "do not make the group") {
				t.Fatalf("Add = %+v, %v; want it refused", sil, err)
			}
			if strings.Contains(err.Error(), "victim") || strings.Contains(err.Error(), "mallory") {
				t.Errorf("the refusal names a value: %v", err)
			}
			for _, k := range []string{keys.Silences(g, tt.rule), keys.SilenceIndex()} { // two slots
				if rdb.Exists(ctx, k).Val() != 0 {
					t.Errorf("a refused silence wrote %s", k)
				}
			}
		})
	}
}
