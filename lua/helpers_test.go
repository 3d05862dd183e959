package lua

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

func newScripts(t *testing.T) (*Scripts, redis.UniversalClient, string) {
	t.Helper()
	rdb := redistest.Client(t)
	s, err := New(Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return s, rdb, redistest.Prefix(t)
}

// testWindow is a window under the test's prefix. Its keys are in the
// prefix's hash tag, or in {t} when it has none: a call's keys share one.
func testWindow(prefix, name string, length time.Duration, threshold int64) Window {
	if !strings.Contains(prefix, "{") {
		prefix += ":{t}"
	}
	return Window{Key: prefix + ":" + name, Marks: prefix + ":" + name + ":crossed", Length: length, Threshold: threshold}
}

// offsetsOf is the bucket's offsets key of a test's window: beside it, in
// its hash tag.
func offsetsOf(w Window) string { return w.Key[:strings.LastIndexByte(w.Key, ':')] + ":o" }

// ev is one event of a test: its partition's source, offset and id.
type ev struct {
	src    string
	offset int64
	id     string
	amount int64
}

// count runs one incr_and_check call of the events into the windows (each
// event into each window) and returns the results, event by event.
func count(t *testing.T, s *Scripts, windows []Window, evs ...ev) []Counted {
	t.Helper()
	res, err := tryCount(t.Context(), s, windows, evs...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func tryCount(ctx context.Context, s *Scripts, windows []Window, evs ...ev) ([]Counted, error) {
	c := &Call{Kind: Count, Source: evs[0].src, Offsets: offsetsOf(windows[0]), Windows: windows}
	for _, e := range evs {
		for w := range windows {
			// A window that keeps evidence keeps each event's id as its entry.
			c.Changes = append(c.Changes, Change{Window: w, Offset: e.offset, ID: IDOf(e.id), Amount: e.amount, Entry: e.id})
		}
	}
	b := s.Batch()
	if err := b.Add(c); err != nil {
		return nil, err
	}
	return c.Results, b.Exec(ctx)
}

// refund runs one sales_decr call of the refunds against the windows.
func refund(t *testing.T, s *Scripts, windows []Window, evs ...ev) []Counted {
	t.Helper()
	r := &Call{Kind: Refund, Source: evs[0].src, Offsets: offsetsOf(windows[0]), Windows: windows}
	for _, e := range evs {
		for w := range windows {
			r.Changes = append(r.Changes, Change{Window: w, Offset: e.offset, ID: IDOf(e.id), Amount: e.amount})
		}
	}
	b := s.Batch()
	if err := b.Add(r); err != nil {
		t.Fatal(err)
	}
	if err := b.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r.Results
}

func value(t *testing.T, rdb redis.UniversalClient, w Window) int64 {
	t.Helper()
	v := countOf(t, rdb, w.Key)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// countOf is a fixed window's count as Redis holds it (incr_and_check.lua:
// a string, or a hash's field c when its rule keeps evidence), "" when
// there is none.
func countOf(t *testing.T, rdb redis.UniversalClient, key string) string {
	t.Helper()
	v, err := redistest.FixedCount(t.Context(), rdb, key)
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return v
}

// setCount makes w's counter hold count, living ttl (none when 0), as
// incr_and_check keeps it: a string, or a hash when w keeps evidence.
func setCount(t *testing.T, rdb redis.UniversalClient, w Window, count string, ttl time.Duration) {
	t.Helper()
	ctx := t.Context()
	pipe := rdb.TxPipeline()
	pipe.Del(ctx, w.Key)
	if w.Keep > 0 {
		pipe.HSet(ctx, w.Key, "c", count)
	} else {
		pipe.Set(ctx, w.Key, count, 0)
	}
	if ttl > 0 {
		pipe.PExpire(ctx, w.Key, ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// testClaim is a claim of alert id by one claimant, on its cooldown and
// record keys, with no record of an older version (its key is beside the
// record's, in its hash tag) and its alert's hash beside the cooldown
// (testAlertKey); silences, when given, are the group's and the rule's.
func testClaim(cooldownKey, recordKey, id string, cooldown time.Duration, silences ...string) AlertClaim {
	c := AlertClaim{CooldownKey: cooldownKey, RecordKey: recordKey, LegacyKey: recordKey + ":legacy", ID: id,
		AlertKey: testAlertKey(cooldownKey, id), Claimant: "alerts/0/1", Cooldown: cooldown}
	if len(silences) == 2 {
		c.SilenceKey, c.RuleSilenceKey = silences[0], silences[1]
	}
	return c
}

// settleOne records that testClaim's claim of id was sent, or failed.
func settleOne(ctx context.Context, s *Scripts, cooldownKey, recordKey, id string, sent bool) error {
	end := SettleFailed
	if sent {
		end = SettleSent
	}
	return s.SettleAlerts(ctx, end, Settlement{CooldownKey: cooldownKey, RecordKey: recordKey, AlertKey: testAlertKey(cooldownKey, id),
		ID: id, Claimant: "alerts/0/1"})
}

// testAlertKey is the hash of alert id whose cooldown is cooldownKey, in
// its hash tag: one for all the alert's receivers.
func testAlertKey(cooldownKey, id string) string { return cooldownKey + ":h:" + id }
