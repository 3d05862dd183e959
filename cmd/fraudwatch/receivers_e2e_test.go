package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// envWebhookDownFor shortens the webhook's outage, a minute by default:
// .ci/run's runs on other servers (older Kafka, Redis 8) take a few
// seconds of it, the README's suite the whole minute.
const envWebhookDownFor = "FRAUDWATCH_TEST_WEBHOOK_DOWN_FOR"

// One crossing routed to Slack, a webhook and PagerDuty arrives at each
// exactly once though the replica is killed (-9) while all three requests
// are in flight (docs/receivers.md); a webhook down for a minute delays
// only its own deliveries; an acknowledge click updates the Slack message,
// fraudwatch_alert_ack_seconds and the PagerDuty incident, and reaches the
// webhook once it is back; a snooze ended early is said in the alert's
// thread, and so is a repeat crossing.
func TestRoutedAlertsReachEachReceiverOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("receivers end to end through the binary")
	}
	// Beside the crash test, the other long test of the binary: most of
	// this one is waiting (the webhook's minute down), and both run in
	// each of .ci/run's suites.
	t.Parallel()
	downFor := time.Minute
	if v := os.Getenv(envWebhookDownFor); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", envWebhookDownFor, v, err)
		}
		downFor = d
	}
	w := newRoutedWorld(t)
	first := w.start(t)
	w.burst(t, "card-A", 3)
	waitFor(t, 90*time.Second, "each receiver's first request held at its gate", func() bool {
		return w.gates[0].holds() > 0 && w.gates[1].holds() > 0 && w.gates[2].holds() > 0
	})
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	waitFor(t, 30*time.Second, "each held request's client gone", func() bool {
		return w.gates[0].abandoned() && w.gates[1].abandoned() && w.gates[2].abandoned()
	})
	for _, g := range w.gates {
		g.open()
	}
	w.start(t)
	waitFor(t, 90*time.Second, "the alert at each receiver", func() bool {
		return len(w.posts("card-A")) > 0 && len(w.hooks("alert.created")) > 0 && len(w.events("trigger")) > 0
	})
	heldID := w.gates[1].first().Get("webhook-id")
	if got := w.hooks("alert.created"); got[0].ID != heldID {
		t.Errorf("the webhook-id after the crash is %q, before it %q: a receiver could not drop the repeat; the webhook kept:%s",
			got[0].ID, heldID, w.hookList())
	}
	w.slackCh, w.slackTS = w.posts("card-A")[0].Channel, w.posts("card-A")[0].TS
	dedup, _ := w.events("trigger")[0]["dedup_key"].(string)

	// The webhook goes down for a minute; Slack and PagerDuty go on.
	w.hook.Down(true)
	down, tried := time.Now(), w.hook.Attempts()
	w.burst(t, "card-B", 3)
	waitFor(t, 30*time.Second, "card-B at Slack and PagerDuty while the webhook is down", func() bool {
		return len(w.posts("card-B")) == 1 && len(w.events("trigger")) == 2
	})
	if took := time.Since(down); took > 20*time.Second {
		t.Errorf("card-B reached Slack and PagerDuty %v after it was produced: the webhook's outage held them", took)
	}
	waitFor(t, 30*time.Second, "the webhook tried card-B", func() bool { return w.hook.Attempts() > tried })
	if len(w.hooks("alert.created")) != 1 {
		t.Fatalf("the webhook kept more than card-A's alert.created before it came back:%s", w.hookList())
	}

	// Acknowledged from Slack: the message, the metric, the incident.
	w.click(t, "fraudwatch_ack")
	waitFor(t, 30*time.Second, "the message updated, the histogram observed, the incident acknowledged", func() bool {
		m, _ := w.slack.Message(w.slackCh, w.slackTS)
		return m.Updates > 0 && strings.Contains(string(m.Blocks), "Acknowledged by") &&
			scrape(t, w.metrics, "fraudwatch_alert_ack_seconds", "rule", "card-burst") == 1 &&
			w.pager.Incident(dedup) == "acknowledged"
	})

	// Snoozed from the message, and the snooze ended early from the CLI:
	// its end is said in the message's thread.
	w.click(t, "fraudwatch_snooze")
	w.expireSnooze(t)
	waitFor(t, 30*time.Second, "the snooze's end in the thread", func() bool {
		for _, r := range w.slack.Replies(w.slackCh, w.slackTS) {
			if strings.Contains(r.Text, "Snooze ended early") {
				return true
			}
		}
		return false
	})

	// A repeat crossing of card-A in its cooldown: a reply in its thread.
	time.Sleep(2100 * time.Millisecond) // the 2 s window ends; the 10 m cooldown holds
	w.burst(t, "card-A", 3)
	waitFor(t, 30*time.Second, "the repeat in card-A's thread", func() bool {
		return len(w.slack.Replies(w.slackCh, w.slackTS)) > 1
	})

	// Back after a minute: the webhook gets what it missed, each once.
	time.Sleep(time.Until(down.Add(downFor)))
	w.hook.Down(false)
	waitFor(t, 90*time.Second, "card-B and the acknowledgement at the webhook", func() bool {
		return len(w.hooks("alert.created")) == 2 && len(w.hooks("alert.acknowledged")) == 1
	})
	for id, n := range w.hook.IDs() {
		if n != 1 {
			t.Errorf("webhook-id %s arrived %d times, want once; the webhook kept:%s", id, n, w.hookList())
		}
	}
	if got := len(w.posts("card-A")); got != 1 {
		t.Errorf("card-A posted %d times to Slack, want once", got)
	}
	if got := len(w.events("trigger")); got != 2 {
		t.Errorf("PagerDuty got %d triggers, want 2 (card-A once, card-B once)", got)
	}
	if n := w.hook.Rejected(); n != 0 {
		t.Errorf("%d webhook requests failed the Standard Webhooks verifier", n)
	}
}
