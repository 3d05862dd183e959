package demo

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/lua"
)

// casesName is the demo's webhook receiver, which the built-in rules'
// routes send one rule to.
const casesName = "cases"

// ackedBy is who acknowledges the demo's alert.
const ackedBy = "demo"

// startCases starts the case system and makes it and the console the
// configuration's receivers, which the built-in rules' routes name. The
// console is named as a webhook only so that the configuration has a
// receiver of its name for routes to name: app.Options.Notifier stands in
// for it, and nothing is ever sent to that URL. Slack, if set, is the
// console's (withSlack), so the slack: section is cleared: beside
// receivers: it would be an error.
func startCases(cfg *config.Config, out *output) (*caseSystem, error) {
	cases, err := startCaseSystem(casesName, out)
	if err != nil {
		return nil, err
	}
	hook := func(url string) *config.WebhookSpec {
		return &config.WebhookSpec{URL: url, Secrets: []config.Secret{config.Secret(cases.secret)}}
	}
	cfg.Receivers = []config.ReceiverSpec{
		{Name: consoleName, Webhook: hook(cases.url + "/never-used")},
		{Name: casesName, Webhook: hook(cases.url)},
	}
	cfg.Slack = config.Default().Slack
	return cases, nil
}

// acknowledger acknowledges an alert as a person would from Slack or the
// CLI: through the alert's life, which every receiver then shows.
type acknowledger struct {
	store  *life.Store
	close  func()
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// acknowledge starts acknowledging the first alert the case system gets,
// with a life store of its own on the demo's Redis and alerts topic, as
// `fraudwatch alert ack` does. Without a case system it does nothing.
func acknowledge(ctx context.Context, cfg *config.Config, cases *caseSystem, out *output) (*acknowledger, error) {
	k := &acknowledger{close: func() {}, cancel: func() {}}
	if cases == nil {
		return k, nil
	}
	rdb, err := app.NewRedis(cfg.Redis)
	if err != nil {
		return nil, fmt.Errorf("demo: acknowledge: %w", err)
	}
	tr, err := app.KafkaTransport(cfg.Kafka)
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("demo: acknowledge: %w", err)
	}
	topic, err := dispatch.NewTopic(dispatch.TopicConfig{Brokers: cfg.Kafka.Brokers, Topic: cfg.Kafka.AlertsTopic, Transport: tr})
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("demo: acknowledge: %w", err)
	}
	k.close = func() { _ = topic.Close(); _ = rdb.Close() }
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err == nil {
		k.store, err = life.New(life.Config{KeyPrefix: cfg.Redis.KeyPrefix}, scripts, topic, nil, nil)
	}
	if err != nil {
		k.close()
		return nil, fmt.Errorf("demo: acknowledge: %w", err)
	}
	ctx, k.cancel = context.WithCancel(ctx)
	k.wg.Go(func() { k.first(ctx, cases.created, out) })
	return k, nil
}

// first acknowledges the alert whose id comes first from ids, unless ctx
// ends before; a failure is printed, not fatal.
func (k *acknowledger) first(ctx context.Context, ids <-chan string, out *output) {
	var id string
	select {
	case <-ctx.Done():
		return
	case id = <-ids:
	}
	ref, err := k.store.ByID(ctx, id)
	if err == nil {
		_, err = k.store.Change(ctx, ref, alert.OpAcknowledge, ackedBy)
	}
	if err != nil && ctx.Err() == nil {
		out.print(fmt.Sprintf("  ! the demo could not acknowledge %s: %v\n", clean(id), err))
	}
}

// stop ends the wait for an alert to acknowledge, then closes the store's
// clients. It is idempotent.
func (k *acknowledger) stop() {
	k.once.Do(func() {
		k.cancel()
		k.wg.Wait()
		k.close()
	})
}

// delivered is where alerts went besides the console's lines, for the
// summary.
type delivered struct {
	console *console
	cases   *caseSystem // nil without the built-in rules' routes
}

// report writes the summary's lines about the webhook, the acknowledgement
// and the threads.
func (d delivered) report(w io.Writer, s snapshot) {
	acks, replies := d.console.shown()
	if d.cases != nil {
		fmt.Fprintf(w, "  webhook %s\t%s (alert.created) and %s (alert.acknowledged), each signature verified",
			d.cases.name, plural(int64(d.cases.received("alert.created")), "alert"),
			plural(int64(d.cases.received("alert.acknowledged")), "acknowledgement"))
		if n := d.cases.received("rejected"); n > 0 {
			fmt.Fprintf(w, ", %d refused", n)
		}
		fmt.Fprintf(w, "\n  acknowledged\t%d by %s, shown on the console and sent to the webhook\n", acks, ackedBy)
	}
	fmt.Fprintf(w, "  thread replies\t%d of %s: repeat crossings within a cooldown, shown in their alert's thread\n",
		replies, plural(s.sum(metricRepeats, "receiver", consoleName), "repeat"))
}
