package consumer

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
)

// orders are n orders of customer c, with event ids prefix0, prefix1, ...
func orders(prefix, c string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = order(fmt.Sprintf("%s%d", prefix, i), c, 100)
	}
	return out
}

// endOffset is topic's partition's high-water mark.
func endOffset(t *testing.T, e *env, topic string, partition int) int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(e.cluster.Brokers...)}
	resp, err := client.ListOffsets(t.Context(), &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(partition)}},
	})
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	return resp.Topics[topic][0].LastOffset
}

// TestOrdersOfAbortedTransactionsAreNotCounted is the case a shop with an
// outbox or a transactional producer meets: 90 orders in an aborted
// transaction and 10 committed. Only the 10 are handed over, no marker is
// dead-lettered, and the committed offset moves past the markers to the
// partition's end, so that the lag reads 0.
func TestOrdersOfAbortedTransactionsAreNotCounted(t *testing.T) {
	e := newEnv(t, 1)
	rec := newRecorder()
	cfg := e.config()
	cfg.LagInterval = 50 * time.Millisecond
	r := start(t, cfg, rec)
	p := e.cluster.TxnProducer(t, e.orders, 0, "zstd")
	p.Transaction(false, orders("aborted-", "c1", 90)...)
	p.Transaction(true, orders("committed-", "c1", 10)...)

	// 100 orders and 2 markers. The coordinator writes a transaction's
	// marker after it has answered the commit or abort: wait for it.
	const end = 102
	waitFor(t, 20*time.Second, "both markers in the log", func() bool { return endOffset(t, e, e.orders, 0) == end })
	waitFor(t, 20*time.Second, "the committed offset at the partition's end", func() bool {
		return committed(t, e, e.orders, 0) == end
	})
	want := make([]string, 10)
	for i := range want {
		want[i] = fmt.Sprintf("committed-%d", i)
	}
	if got := rec.ids(); !slices.Equal(got, want) {
		t.Fatalf("handed over %v, want %v", got, want)
	}
	if n := endOffset(t, e, e.dlq, 0); n != 0 {
		t.Fatalf("%d dead letters, want none", n)
	}
	skipped := func(reason string) float64 {
		return testutil.ToFloat64(r.c.fetch.skips.WithLabelValues(e.orders, reason))
	}
	if m, a := skipped("transaction_marker"), skipped("aborted_transaction"); m != 2 || a != 90 {
		t.Fatalf("skipped %v markers and %v aborted records, want 2 and 90", m, a)
	}
	waitFor(t, 5*time.Second, "lag 0", func() bool { v, ok := r.lag(t, e.orders, 0); return ok && v == 0 })
}
