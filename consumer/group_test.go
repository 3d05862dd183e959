package consumer

import (
	"context"
	"crypto/tls"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/plain"
)

// A group hands kafka-go every setting of its own: membership timings,
// start offset, client id, TLS and SASL, for the group and for the other
// clients of its cluster (README, Configuration).
func TestGroupHandsItsSettingsToKafkaGo(t *testing.T) {
	for _, earliest := range []bool{true, false} {
		cfg := GroupConfig{
			Brokers: []string{"127.0.0.1:9092", "127.0.0.1:9093"}, GroupID: "fw", Topics: []string{"orders", "refunds"},
			ClientID: "fraudwatch-eu", TLS: &tls.Config{ServerName: "kafka.internal"},
			SASL:              plain.Mechanism{Username: "fw", Password: "secret"},
			StartEarliest:     earliest,
			CommitInterval:    2 * time.Second,
			SessionTimeout:    45 * time.Second,
			HeartbeatInterval: 5 * time.Second,
			RebalanceTimeout:  time.Minute,
		}
		g, err := NewGroup(cfg, MessageHandlerFunc(func(context.Context, []kafka.Message) (int, error) { return 0, nil }), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		gc := g.groupConfig()
		start := kafka.LastOffset
		if earliest {
			start = kafka.FirstOffset
		}
		if gc.ID != "fw" || !slices.Equal(gc.Brokers, cfg.Brokers) || !slices.Equal(gc.Topics, cfg.Topics) ||
			gc.SessionTimeout != 45*time.Second || gc.HeartbeatInterval != 5*time.Second || gc.RebalanceTimeout != time.Minute ||
			gc.StartOffset != start {
			t.Errorf("earliest=%v: kafka-go's group config %+v", earliest, gc)
		}
		if d := gc.Dialer; d != g.dialer || d.ClientID != "fraudwatch-eu" || d.TLS != cfg.TLS || d.SASLMechanism != cfg.SASL {
			t.Errorf("the group's dialer %+v, want the group's client id, TLS and SASL", gc.Dialer)
		}
		if tr := cfg.Transport(); tr.ClientID != "fraudwatch-eu" || tr.TLS != cfg.TLS || tr.SASL != cfg.SASL {
			t.Errorf("the cluster's transport %+v, want the group's client id, TLS and SASL", tr)
		}
	}
}
