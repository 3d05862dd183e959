package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

// logLines are the records of a JSON log with message msg.
func logLines(logs, msg string) []map[string]any {
	var out []map[string]any
	for l := range strings.Lines(logs) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// wantListed wants each of alerts listed in Recent with outcome ("": not
// listed).
func (e *testEnv) wantListed(t *testing.T, alerts []alert.Alert, outcome string) {
	t.Helper()
	listed := map[string]string{}
	for _, s := range e.d.Recent() {
		listed[s.ID] = s.Outcome
	}
	for _, a := range alerts {
		if listed[a.ID] != outcome {
			t.Errorf("Recent lists %s as %q, want %q", a.ID, listed[a.ID], outcome)
		}
	}
}

// silence starts a silence of a's rule and group, as fraudwatch silence
// does, for an hour.
func (e *testEnv) silence(t *testing.T, a alert.Alert) {
	t.Helper()
	g := e.keys.Group(a.GroupValues)
	end := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	if err := e.rdb.HSet(t.Context(), e.keys.Silences(g, a.Rule), "s1", end).Err(); err != nil {
		t.Fatal(err)
	}
}

// Each outcome is recorded once, in one place: its metric, its line in
// Recent for each alert, and one log line for the message that settled
// them, a digest of two alerts included.
func TestEveryOutcomeIsRecordedOnce(t *testing.T) {
	refusal := func(err error) alert.Notifier {
		return alert.NotifierFunc(func(context.Context, alert.Alert) error { return err })
	}
	tests := []struct {
		name    string
		outcome string
		msg     string // its log line
		metric  string // the counter it adds to, with labels
		labels  []string
		// run hands the dispatcher its messages and returns the alerts
		// settled with the outcome.
		run func(t *testing.T, env *testEnv) []alert.Alert
		// notifier is the test's; nil: one that takes everything.
		notifier alert.Notifier
	}{
		{name: "sent", outcome: dispatch.OutcomeSent, msg: "alert sent",
			metric: "fraudwatch_alerts_sent_total",
			run:    func(t *testing.T, env *testEnv) []alert.Alert { return handleAll(t, env, env.alert("g1", "e1")) }},
		{name: "digested", outcome: dispatch.OutcomeDigested, msg: "alerts past the budget sent as one digest",
			metric: "fraudwatch_alerts_digested_total",
			run: func(t *testing.T, env *testEnv) []alert.Alert {
				env.withBudget(t, &digestNotifier{}, true, false)
				all := handleAll(t, env, env.alert("g1", "e1"), env.alert("g2", "e2"), env.alert("g3", "e3"))
				return all[1:] // the first went alone, within the budget
			}},
		{name: "failed", outcome: dispatch.OutcomeFailed, msg: "alert refused for good; given up, cooldown released",
			metric: "fraudwatch_alert_failures_total", notifier: refusal(alert.Permanent(errors.New("slack: invalid_blocks"))),
			run: func(t *testing.T, env *testEnv) []alert.Alert { return handleAll(t, env, env.alert("g1", "e1")) }},
		{name: "parked", outcome: dispatch.OutcomeParked,
			msg:    "alert parked: slack refuses its channel; other channels' alerts go on, and it is retried",
			metric: "fraudwatch_alerts_parked", labels: []string{"channel", "(default)"},
			notifier: refusal(&alert.ChannelError{Channel: "#gone", Err: errors.New("slack: is_archived")}),
			run:      func(t *testing.T, env *testEnv) []alert.Alert { return handleAll(t, env, env.alert("g1", "e1")) }},
		{name: "cooldown", outcome: dispatch.SuppressedCooldown, msg: "alert suppressed: the cooldown is held by an earlier alert",
			metric: "fraudwatch_alerts_suppressed_total", labels: []string{"reason", "cooldown"},
			run: func(t *testing.T, env *testEnv) []alert.Alert {
				return handleAll(t, env, env.alert("g1", "e1"), env.alert("g1", "e2"))[1:]
			}},
		{name: "silenced", outcome: dispatch.SuppressedSilenced, msg: "alert silenced: a silence of its rule or group runs",
			metric: "fraudwatch_alerts_suppressed_total", labels: []string{"reason", "silenced"},
			run: func(t *testing.T, env *testEnv) []alert.Alert {
				a := env.alert("g1", "e1")
				env.silence(t, a)
				return handleAll(t, env, a)
			}},
		{name: "shadow", outcome: dispatch.SuppressedShadow, msg: "shadow rule crossed its threshold; not notifying",
			metric: "fraudwatch_alerts_suppressed_total", labels: []string{"reason", "shadow"},
			run: func(t *testing.T, env *testEnv) []alert.Alert {
				a := env.alert("g1", "e1")
				a.Mode = alert.ModeShadow
				env.d.SetRules(map[string]dispatch.RuleSettings{a.Rule: settingsOf(a)})
				return handleAll(t, env, a)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.notifier
			if n == nil {
				n = alert.NotifierFunc(func(context.Context, alert.Alert) error { return nil })
			}
			var logs testkit.Buffer
			env := testDispatcherLogging(t, n, dispatch.DispatcherConfig{}, slog.New(slog.NewJSONHandler(&logs, nil)))
			env.knowRule()
			settled := tt.run(t, env)

			if got := env.metric(t, tt.metric, tt.labels...); got != float64(len(settled)) {
				t.Errorf("%s%v = %v, want %d", tt.metric, tt.labels, got, len(settled))
			}
			env.wantListed(t, settled, tt.outcome)
			lines := logLines(logs.String(), tt.msg)
			if len(lines) != 1 {
				t.Fatalf("%d log lines %q, want 1 for the message that settled %d alerts:\n%s", len(lines), tt.msg, len(settled), logs.String())
			}
			if lines[0]["rule"] != settled[0].Rule {
				t.Errorf("log line %v, want it to name the rule", lines[0])
			}
		})
	}
}

// handleAll hands alerts to the dispatcher as one batch of the alerts
// topic, and wants every message done.
func handleAll(t *testing.T, env *testEnv, alerts ...alert.Alert) []alert.Alert {
	t.Helper()
	var msgs []kafka.Message
	for i, a := range alerts {
		msgs = append(msgs, env.message(t, a, int64(i)))
	}
	if done, err := env.d.HandleMessages(t.Context(), msgs); err != nil || done != len(msgs) {
		t.Fatalf("HandleMessages = %d, %v; want all %d done", done, err, len(msgs))
	}
	// Those past the budget wait in Redis: the drainer sends them.
	if err := env.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	return alerts
}

// A parked alert takes the same path as any other when it is tried again:
// claimed, and a silence that started meanwhile settles it as silenced,
// recorded as every silenced alert is, not forgotten without a trace.
func TestAParkedAlertSilencedMeanwhileIsRecorded(t *testing.T) {
	n := &channelNotifier{gone: true}
	var logs testkit.Buffer
	env := testDispatcherLogging(t, n, dispatch.DispatcherConfig{}, slog.New(slog.NewJSONHandler(&logs, nil)))
	env.d.SetRules(map[string]dispatch.RuleSettings{"r-gone": {Mode: alert.ModeAlert, Channel: "#gone"}})
	a := env.alert("g1", "e1")
	a.Rule, a.ID = "r-gone", "r-gone/e1"
	handleAll(t, env, a)
	if got := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); got != 1 {
		t.Fatalf("%d alerts parked, want 1", got)
	}

	env.silence(t, a)
	n.mu.Lock()
	n.gone = false // the channel is back, but the alert is silenced now
	n.mu.Unlock()
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := n.snapshot(); len(got) != 0 {
		t.Errorf("posted %v, want nothing: the alert is silenced", got)
	}
	if got := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); got != 0 {
		t.Errorf("%d alerts still parked, want the silenced one unparked", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_suppressed_total", "rule", "r-gone", "reason", "silenced"); got != 1 {
		t.Errorf("suppressed{r-gone, silenced} = %v, want 1", got)
	}
	if recent := env.d.Recent(); len(recent) == 0 || recent[0].ID != a.ID || recent[0].Outcome != dispatch.SuppressedSilenced {
		t.Errorf("Recent = %+v, want the parked alert listed silenced first", recent)
	}
	if lines := logLines(logs.String(), "alert silenced: a silence of its rule or group runs"); len(lines) != 1 {
		t.Errorf("%d log lines of the silence, want 1", len(lines))
	}
}
