package consumer

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
)

// fakeEnv is newEnv on an in-process broker whatever the environment says,
// for tests that steer the broker.
func fakeEnv(t *testing.T, partitions int) *env {
	c := kafkatest.NewFake(t)
	return &env{
		cluster: c,
		orders:  c.Topic(t, "orders", partitions),
		refunds: c.Topic(t, "refunds", partitions),
		dlq:     c.Topic(t, "dlq", 1),
		group:   kafkatest.Group(t, "fw"),
	}
}

// TestSlowFetchAnswersAreNotTimeouts holds what flooded the log: kafka-go's
// Reader gave a broker's answer to an idle fetch a quarter of its 100 ms
// MaxWait to arrive, and a later one was an i/o timeout, a WARN and a new
// connection. Here every answer comes 60 ms after the broker has waited
// the fetch's MaxWait: an idle partition is fetched again and again
// without a failure or a WARN, and an order still comes through.
func TestSlowFetchAnswersAreNotTimeouts(t *testing.T) {
	e := fakeEnv(t, 1)
	var fetches atomic.Int64
	fake := e.cluster.Fake()
	fake.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		for _, topic := range req.(*kmsg.FetchRequest).Topics {
			if topic.Topic == e.orders {
				fetches.Add(1)
			}
		}
		fake.SleepControl(func() { time.Sleep(60 * time.Millisecond) })
		return nil, nil, false
	})
	cfg := e.config()
	cfg.FetchMaxWait = 100 * time.Millisecond
	logs, c := runLoggingConsumer(t, cfg)
	waitFor(t, 30*time.Second, "5 idle fetches of the orders partition", func() bool { return fetches.Load() >= 5 })
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c1", 100))
	waitFor(t, 30*time.Second, "the order handled", func() bool { return committed(t, e, e.orders, 0) == 1 })
	waitFor(t, 30*time.Second, "5 more idle fetches", func() bool { return fetches.Load() >= 12 })
	for _, reason := range fetchReasons {
		if n := testutil.ToFloat64(c.fetch.errs.WithLabelValues(e.orders, reason)); n != 0 {
			t.Errorf("fetch errors{reason=%s} = %v, want 0", reason, n)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("logged %s", line)
		}
	}
}
