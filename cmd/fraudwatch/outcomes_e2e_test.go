package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/consumer"
)

// Outcomes from a signed Slack click, the CLI and the outcomes topic show
// in the metrics, the status page and label list; a relabel counts once;
// bad records are dead-lettered with their reason and stop nothing; a
// replica killed -9 while it records a stream of outcomes loses none
// (docs/outcomes.md).
func TestOutcomesFromEveryWayIn(t *testing.T) {
	if testing.Short() {
		t.Skip("outcomes end to end through the binary")
	}
	t.Parallel()
	w := newRoutedWorld(t)
	for _, g := range w.gates {
		g.open()
	}
	first := w.start(t)
	w.burst(t, "card-L", 3)
	waitFor(t, 90*time.Second, "the alert in Slack", func() bool { return len(w.posts("card-L")) == 1 })
	post := w.posts("card-L")[0]
	w.slackCh, w.slackTS = post.Channel, post.TS

	// Fraud, from Slack: the alert and its three orders; again: nothing more.
	w.click(t, "fraudwatch_label_fraud")
	fraudAlerts := func() float64 {
		return scrape(t, w.metrics, "fraudwatch_alert_outcomes_total", "rule", "card-burst", "outcome", "fraud")
	}
	waitFor(t, 30*time.Second, "the message labelled and the alert counted fraud", func() bool {
		m, _ := w.slack.Message(w.slackCh, w.slackTS)
		return strings.Contains(string(m.Blocks), "Labelled fraud") && fraudAlerts() == 1
	})
	if got := scrape(t, w.metrics, "fraudwatch_outcomes_recorded_total", "via", "slack", "outcome", "fraud"); got != 3 {
		t.Errorf("orders labelled fraud from Slack: %v, want the alert's 3", got)
	}
	w.click(t, "fraudwatch_label_fraud") // answered once it is recorded
	if got := fraudAlerts(); got != 1 {
		t.Errorf("a second Fraud click counted again: fraudwatch_alert_outcomes_total = %v", got)
	}

	// From the CLI, through the topic: an order no alert listed.
	if out, err := command("label", "add", "--config", w.config, "--outcome", "fraud", "--as", "alice", "o-missed-1").CombinedOutput(); err != nil {
		t.Fatalf("label add: %v\n%s", err, out)
	}
	if got := scrape(t, w.metrics, "fraudwatch_outcomes_recorded_total", "via", "cli", "outcome", "fraud"); got != 1 {
		t.Errorf("outcomes recorded from the CLI: %v, want 1", got)
	}

	// From the topic: what other systems write, the bad with the good.
	bad := map[string]string{
		"malformed_json":   `{"type":"outcome",`,
		"invalid_outcome":  `{"type":"outcome","order_id":"o-x","outcome":"chargeback","source":"psp","occurred_at":"2026-12-01T10:00:00Z"}`,
		"missing_field":    `{"type":"outcome","outcome":"fraud","source":"psp","occurred_at":"2026-12-01T10:00:00Z"}`,
		"oversized":        `{"type":"outcome","order_id":"o-x","outcome":"fraud","source":"psp","occurred_at":"2026-12-01T10:00:00Z","note":"` + strings.Repeat("x", 5000) + `"}`,
		"invalid_alert_id": `{"type":"outcome","alert_id":"card-burst/no-such-event","outcome":"fraud","source":"psp","occurred_at":"2026-12-01T10:00:00Z"}`,
	}
	var msgs []kafka.Message
	for _, v := range bad {
		msgs = append(msgs, kafka.Message{Value: []byte(v)})
	}
	msgs = append(msgs, kafka.Message{Key: []byte("o-legit-1"),
		Value: []byte(`{"type":"outcome","order_id":"o-legit-1","outcome":"legit","source":"manual_review","occurred_at":"2026-12-01T10:00:00Z"}`)})
	w.produceOutcomes(t, msgs...)
	waitFor(t, 30*time.Second, "the topic's good outcome recorded and the bad ones refused", func() bool {
		return scrape(t, w.metrics, "fraudwatch_outcomes_recorded_total", "via", "topic", "outcome", "legit") == 1 &&
			scrape(t, w.metrics, "fraudwatch_outcomes_invalid_total") == float64(len(bad))
	})
	reasons := w.deadLetterReasons(t, len(bad))
	for reason := range bad {
		if !reasons[reason] {
			t.Errorf("no dead letter says %s; they say %v", reason, reasons)
		}
	}

	// A stream of chargebacks: the replica killed -9 once it has recorded
	// the first ten (their offsets most likely not yet committed), the
	// rest written while no replica runs; the next replica records the
	// rest, and counts none of the ten again.
	const n = 300
	chargebacks := func(from, to int) []kafka.Message {
		var batch []kafka.Message
		for i := from; i < to; i++ {
			id := fmt.Sprintf("o-cb-%03d", i)
			batch = append(batch, kafka.Message{Key: []byte(id), Value: []byte(fmt.Sprintf(
				`{"type":"outcome","order_id":%q,"outcome":"fraud","source":"chargeback","occurred_at":"2026-12-02T10:00:00Z"}`, id))})
		}
		return batch
	}
	chargebacksRecorded := func() float64 {
		return scrape(t, w.metrics, "fraudwatch_outcomes_recorded_total", "via", "topic", "outcome", "fraud")
	}
	w.produceOutcomes(t, chargebacks(0, 10)...)
	waitFor(t, 30*time.Second, "the first ten chargebacks recorded", func() bool { return chargebacksRecorded() == 10 })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	w.produceOutcomes(t, chargebacks(10, n)...)
	w.start(t)
	var listed []struct {
		OrderID string `json:"order_id"`
		Label   string `json:"outcome"`
		Source  string `json:"source"`
		Via     string `json:"via"`
	}
	waitFor(t, 90*time.Second, "every chargeback recorded after the restart", func() bool {
		out, err := command("label", "list", "--config", w.config, "--outcome", "fraud", "--limit", "1000", "--format", "json").Output()
		listed = listed[:0]
		return err == nil && json.Unmarshal(out, &listed) == nil && len(listed) == n+3+1
	})
	if got := chargebacksRecorded(); got != n-10 {
		t.Errorf("the replica after the kill recorded %v chargebacks, want the %d the killed one had not", got, n-10)
	}
	bySource := map[string]int{}
	for _, l := range listed {
		bySource[l.Source]++
	}
	if bySource["chargeback"] != n || bySource["slack"] != 3 || bySource["cli"] != 1 {
		t.Errorf("fraud outcomes by source: %v, want chargeback %d, slack 3, cli 1", bySource, n)
	}

	// The status page, from Redis: the rule's alert judged fraud, its three
	// orders caught, the others missed.
	page := w.statusPage(t)
	want := fmt.Sprintf(`<tr><td>card-burst</td><td class="num">1</td><td class="num">1</td>`+"\n"+
		`<td class="num">100%%</td><td class="num">3</td><td class="num">%d</td>`, n+1)
	if !strings.Contains(page, want) {
		t.Errorf("the status page lacks %q:\n%s", want, page[strings.Index(page, `id="quality"`):])
	}
}

// produceOutcomes writes msgs to the outcomes topic.
func (w *routedWorld) produceOutcomes(t *testing.T, msgs ...kafka.Message) {
	t.Helper()
	wr := &kafka.Writer{Addr: kafka.TCP(w.brokers...), Topic: w.outcomes, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, BatchBytes: 1 << 20}
	defer wr.Close()
	if err := wr.WriteMessages(t.Context(), msgs...); err != nil {
		t.Errorf("produce outcomes: %v", err)
	}
}

// deadLetterReasons reads n dead letters of the outcomes topic and returns
// the reasons their fraudwatch-error headers give.
func (w *routedWorld) deadLetterReasons(t *testing.T, n int) map[string]bool {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: w.brokers, Topic: w.dlq, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	reasons := map[string]bool{}
	for got := 0; got < n; {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		m, err := r.ReadMessage(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read dead letter %d of %d: %v", got+1, n, err)
		}
		for _, h := range m.Headers {
			if h.Key == consumer.HeaderError && strings.HasPrefix(string(h.Value), "outcome ") {
				reason, _, _ := strings.Cut(strings.TrimPrefix(string(h.Value), "outcome "), ":")
				reasons[reason] = true
				got++
			}
		}
	}
	return reasons
}

// statusPage is the status page of the replica at w.metrics.
func (w *routedWorld) statusPage(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + w.metrics + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
