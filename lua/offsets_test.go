package lua

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// The four counting scripts share a bucket's offsets, and each call gives
// them its own life: the retention, or its longest window if longer. A call
// whose windows are short must not cut the TTL a longer window's call gave
// them, or the offsets would go while that window still lives, and a
// redelivery after that would count in it twice.
func TestOffsetsLifeIsNeverShortened(t *testing.T) {
	rdb := redistest.Client(t)
	s, err := New(Config{Retention: time.Hour}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	const long, short = 3 * time.Hour, time.Minute
	// Each counts one event (offset off) into a new window of the bucket of
	// prefix.
	type call func(t *testing.T, prefix string, off int64)
	fixed := func(length time.Duration) call {
		return func(t *testing.T, prefix string, off int64) {
			count(t, s, []Window{testWindow(prefix, fmt.Sprint("f", off), length, 100)}, ev{"0:t", off, "e", 1})
		}
	}
	refunded := func(length time.Duration) call {
		return func(t *testing.T, prefix string, off int64) {
			refund(t, s, []Window{testWindow(prefix, fmt.Sprint("r", off), length, 100)}, ev{"0:r", off, "e", 1})
		}
	}
	sliding := func(length time.Duration) call { // lives twice its length
		return func(t *testing.T, prefix string, off int64) {
			slide(t, s, []Window{slidingWindow(prefix, fmt.Sprint("s", off), length, 0, 100)},
				sev{src: "0:t", offset: off, id: "e", amount: 1})
		}
	}
	distinctOf := func(isSliding bool, length time.Duration) call {
		return func(t *testing.T, prefix string, off int64) {
			distinct(t, s, []Window{distinctWindow(prefix, fmt.Sprint("d", off), isSliding, length, 0, 100)},
				sev{src: "0:t", offset: off, id: "e", value: "v"})
		}
	}
	for i, tc := range []struct {
		name        string
		first, then call
	}{
		{"a long fixed window, then a short one", fixed(long), fixed(short)},
		{"a long sliding window, then a short fixed one", sliding(long), fixed(short)},
		{"a long fixed window, then a refund into a short one", fixed(long), refunded(short)},
		{"a long fixed window, then a short sliding one", fixed(long), sliding(short)},
		{"a long fixed distinct window, then a short sliding one", distinctOf(false, long), distinctOf(true, short)},
		{"a long sliding window, then a short distinct one", sliding(long), distinctOf(false, short)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fmt.Sprint(prefix, ":", i)
			offsets := offsetsOf(testWindow(p, "x", time.Minute, 1))
			tc.first(t, p, 1)
			if ttl := rdb.TTL(t.Context(), offsets).Val(); ttl <= long-time.Minute {
				t.Fatalf("after the long window's call the offsets' TTL is %v, want at least %v", ttl, long-time.Minute)
			}
			tc.then(t, p, 2)
			if ttl := rdb.TTL(t.Context(), offsets).Val(); ttl <= long-time.Minute {
				t.Fatalf("after the short window's call the offsets' TTL is %v, want the long window's %v kept", ttl, long)
			}
		})
	}
}
