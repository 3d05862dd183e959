package demo

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/backtest"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/rules"
)

// alertLine matches the first line of a printed alert and captures the
// severity and the rule.
var alertLine = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  ALERT\s+(\S+)\s+([a-z0-9_-]+):`)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// number extracts the integer captured by re's first group, failing the
// test when the output has no such line.
func number(t *testing.T, out string, re string) int {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("output has no line matching %q", re)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRunCatchesFraud(t *testing.T) {
	t.Parallel() // 20 s of the demo, mostly waiting: run alongside
	// Long enough for the second card spike of a cycle (from 15 s, its
	// second order by 16.6 s at the latest), after the rules' reload
	// halfway.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var buf, record bytes.Buffer
	var truth *Truth
	err := Run(ctx, Options{Out: &buf, Color: false, Seed: 7, Logger: testLogger(t), Record: &record,
		Truth: func(tr Truth) { truth = &tr }})
	out := buf.String()
	t.Logf("demo output:\n%s", out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	for _, want := range []string{"fraudwatch demo", "kfake at 127.0.0.1:", "miniredis at 127.0.0.1:",
		"http://127.0.0.1:", "built-in demo rules", "orders-per-customer-1m", "amount-per-card-10m",
		"orders-per-ip-1m", "orders-per-device-1m"} {
		if !strings.Contains(out, want) {
			t.Errorf("header lacks %q", want)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("output has ANSI codes although Color is false")
	}

	alerts := alertLine.FindAllStringSubmatch(out, -1)
	fired := map[string]bool{}
	for _, a := range alerts {
		fired[a[2]] = true
	}
	if len(fired) < 2 {
		t.Errorf("alerts fired for rules %v; want at least two different rules", slices.Sorted(maps.Keys(fired)))
	}
	if fired["orders-per-device-1m"] {
		t.Error("the shadow rule orders-per-device-1m was printed as an alert")
	}

	summary, ok := strings.CutPrefix(out[strings.Index(out, "\nSummary"):], "\n")
	if !ok {
		t.Fatal("output has no summary")
	}
	if n := number(t, summary, `events consumed\s+(\d+) orders`); n == 0 {
		t.Error("summary: no orders consumed")
	}
	if n := number(t, summary, `dead-lettered\s+(\d+)`); n == 0 {
		t.Error("summary: no invalid event dead-lettered")
	}
	sent := number(t, summary, `alerts sent\s+(\d+)`)
	if sent == 0 {
		t.Error("summary: no alert sent")
	}
	if sent != len(alerts) {
		t.Errorf("summary says %d alerts sent, the console printed %d", sent, len(alerts))
	}
	crossings := 0
	for _, r := range []string{"orders-per-customer-1m", "amount-per-card-10m", "orders-per-ip-1m", "orders-per-device-1m"} {
		crossings += number(t, summary, `(?m)^  `+r+`\s+(\d+)`)
	}
	if crossings == 0 {
		t.Error("summary: no threshold crossings")
	}
	// The live quality, from the pipeline's outcome store: each alerting
	// rule's alerts are those it alerted, some judged by the outcomes.
	if !strings.Contains(summary, "\n  rule quality, live from the outcome store") {
		t.Error("summary: no rule quality")
	}
	judged := 0
	for _, r := range []string{"orders-per-customer-1m", "amount-per-card-10m", "orders-per-ip-1m"} {
		alerted := number(t, summary, `(?m)^  `+r+`\s+\d+\s+(\d+)\s+\d+\s+\d+$`)
		m := regexp.MustCompile(`(?m)^  ` + r + `\s+(\d+)\s+(\d+)\s+(\d+ %|-)`).FindStringSubmatch(summary)
		if m == nil || m[1] != strconv.Itoa(alerted) {
			t.Errorf("rule quality of %s: %v, want %d alerts as alerted", r, m, alerted)
			continue
		}
		n, _ := strconv.Atoi(m[2])
		judged += n
	}
	if judged == 0 {
		t.Error("rule quality: no alert judged by an outcome")
	}
	if n := number(t, summary, `suppressed\s+(\d+) shadow`); n == 0 {
		t.Error("summary: no shadow suppression, although every burst crosses the device rule")
	}
	checkRoutedAckedThreaded(t, out, summary)

	// Halfway, the rules file is rewritten with a lower threshold: the
	// terminal says so, and the next card spike is alerted at it.
	reloadAt := strings.Index(out, "rules file changed and reloaded: amount-per-card-10m threshold 1000000 → 700000")
	if reloadAt < 0 {
		t.Fatal("the demo did not show its rules' reload")
	}
	if !regexp.MustCompile(`amount-per-card-10m: .*\n.* threshold KRW 700,000 ·`).MatchString(out[reloadAt:]) {
		t.Error("no alert after the reload follows the new threshold")
	}
	if strings.Contains(out[:reloadAt], "threshold KRW 700,000") {
		t.Error("an alert before the reload shows the new threshold")
	}

	// A backtest of the recording raises the alerts the run raised, alert
	// by alert: rule, group, order and value, under the rules the
	// recording carries, the reload's from the point it took effect.
	if !regexp.MustCompile(`(?m)^Recorded \d+ events and \d+ outcomes to the recording, and the rules they ran under: built-in demo rules, ` +
		`cmd/fraudwatch/demo/rules.yaml, reloaded at 0:\d\d: amount-per-card-10m threshold 1000000 → 700000$`).MatchString(out) {
		t.Error("the summary does not say what was recorded")
	}
	var printed []string
	for _, m := range alertFields.FindAllStringSubmatch(out, -1) {
		printed = append(printed, fmt.Sprintf("%s %s %s %s", m[1], m[2], m[4], regexp.MustCompile(`\D`).ReplaceAllString(m[3], "")))
	}
	slices.Sort(printed)
	if len(printed) != len(alerts) {
		t.Fatalf("read %d of the %d printed alerts", len(printed), len(alerts))
	}
	checkOutcomesSent(t, summary, record.Bytes(), truth)
	evs, err := backtest.Read(bytes.NewReader(record.Bytes()), config.Default().Kafka.MaxEventBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.RuleSets) != 2 || len(evs.Invalid) == 0 {
		t.Fatalf("the recording has %d rule sets (want 2: the start's, the reload's), invalid lines %v", len(evs.RuleSets), evs.Invalid)
	}
	// Scored against the outcomes it carries, each rule's precision and
	// recall are those the traffic's own truth gives (checkScores).
	outs := backtest.NewOutcomes(time.Now())
	for _, l := range evs.OutcomeLines {
		outs.Add(l)
	}
	for _, e := range []backtest.Engine{backtest.Model, backtest.Lua} {
		rep, scores, err := backtest.ReplayScored(t.Context(), evs.RuleSets, evs, outs, e, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkScores(t, *truth, scores)
		var replayed []string
		for _, a := range rep.Alerts {
			if a.Outcome == "sent" {
				replayed = append(replayed, fmt.Sprintf("%s %s %s %d", a.Rule, a.Group, a.Order, a.Value))
			}
		}
		slices.Sort(replayed)
		// Each crossing is of a burst whose truth says it trips the rule,
		// and each complete burst trips them all, the reload included.
		checkTrips(t, *truth, rep.Alerts)
		if !slices.Equal(printed, replayed) {
			t.Errorf("the run alerted (rule, group, order, value)\n%s\nits backtest (%s)\n%s",
				strings.Join(printed, "\n"), e, strings.Join(replayed, "\n"))
		}
	}
}

// checkOutcomesSent checks the outcomes the summary says were sent
// against the recording's outcome lines and the truth Run gave.
func checkOutcomesSent(t *testing.T, summary string, record []byte, truth *Truth) {
	t.Helper()
	if truth == nil {
		t.Fatal("Run did not give its truth")
	}
	sent := number(t, summary, `outcomes sent\s+(\d+) to fraudwatch.outcomes, one an order: \d+ fraud \(chargebacks\)`)
	if n := number(t, summary, `planted\s+(\d+) fraud bursts`); n == 0 || sent == 0 {
		t.Errorf("summary: %d fraud bursts planted, %d outcomes sent", n, sent)
	}
	labels := map[string]int{}
	for line := range bytes.Lines(record) {
		o, err := outcome.Decode(line, time.Now())
		if err != nil {
			continue // an event or a rules line
		}
		kind, b := truth.Of(o.OrderID)
		if b == nil || b.Outcome != o.Label {
			t.Errorf("recorded outcome %s for order %s, a %s order (burst %v)", o.Label, o.OrderID, kind, b)
		}
		labels[string(o.Label)]++
	}
	want := map[string]int{}
	for _, b := range truth.Bursts {
		if b.Outcome != "" {
			want[string(b.Outcome)] += len(b.Orders)
		}
	}
	if !maps.Equal(labels, want) || labels["fraud"]+labels["legit"]+labels["unclear"] != sent {
		t.Errorf("recorded outcomes %v, the truth's %v, the summary says %d sent", labels, want, sent)
	}
}

// alertFields matches a printed alert's rule and, on its second line, its
// group, its value and its order.
var alertFields = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  ALERT\s+\S+\s+([a-z0-9_-]+):.*\n\s+(\S+=\S+) · ([^·]*?) within [^·]*· order (\S+)`)

// With a configuration, its rules and its Slack section are used; its Kafka
// and Redis are not (they point nowhere here).
func TestRunWithConfig(t *testing.T) {
	t.Parallel() // 6 s of the demo, mostly waiting
	var posts atomic.Int32
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		posts.Add(1)
		_, _ = w.Write([]byte("ok"))
	}))
	defer slack.Close()

	rs, err := config.ParseRules([]byte(`
rules:
  - name: orders-per-email-1m
    description: Three orders from one email address within a minute
    metric: count
    group_by: [email]
    window: 1m
    threshold: 3
    severity: high
`), "custom-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Kafka.Brokers = []string{"192.0.2.1:9092"}
	cfg.Redis.Addrs = []string{"192.0.2.1:6379"}
	cfg.RulesFile = "/etc/fraudwatch/custom-rules.yaml"
	cfg.Rules = rs
	cfg.Slack.WebhookURL = config.Secret(slack.URL + "/hook")

	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second)
	defer cancel()
	var buf bytes.Buffer
	// The summary shows the live figures Quality gives, read while the
	// pipeline still runs.
	figures := &fakeQualities{answers: [][]outcome.RuleQuality{{{Rule: "orders-per-email-1m", Alerts: 7, Fraud: 4, Legit: 1,
		WithOutcome: 5, Precision: share(0.8), FraudOrders: 10, Caught: 4, Missed: 6, Truncated: true}}}}
	var given *app.App
	err = Run(ctx, Options{Config: &cfg, Out: &buf, Seed: 11, Logger: testLogger(t),
		Quality: func(a *app.App) Qualities { given = a; return figures }})
	out := buf.String()
	t.Logf("demo output:\n%s", out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(out, "from /etc/fraudwatch/custom-rules.yaml") || !strings.Contains(out, "sent to Slack (incoming webhook)") {
		t.Error("header does not name the configured rules file and Slack")
	}
	if strings.Contains(out, "orders-per-customer-1m") {
		t.Error("the built-in rules were used although the configuration has rules")
	}
	alerts := alertLine.FindAllStringSubmatch(out, -1)
	if len(alerts) == 0 {
		t.Fatal("no alert printed")
	}
	for _, a := range alerts {
		if a[2] != "orders-per-email-1m" {
			t.Errorf("alert for rule %s, want only orders-per-email-1m", a[2])
		}
	}
	if !strings.Contains(out, "\n  rule quality, live from the outcome store") || given == nil ||
		!strings.Contains(out, "  orders-per-email-1m       7             5       80 %                    4       6    40 %\n") {
		t.Errorf("the summary does not show the figures Quality gave (given the pipeline: %v)", given != nil)
	}
	if got := int(posts.Load()); got != len(alerts) {
		t.Errorf("Slack received %d posts for %d printed alerts", got, len(alerts))
	}
	if cfg.Kafka.Brokers[0] != "192.0.2.1:9092" || cfg.Kafka.GroupID != "fraudwatch" {
		t.Error("Run changed the caller's configuration")
	}
}

func TestBuildConfig(t *testing.T) {
	custom := []rules.Rule{{Name: "r", Metric: alert.Count, GroupBy: []string{"ip"}, Window: time.Minute,
		Threshold: 1, Severity: alert.SeverityInfo, Mode: alert.ModeAlert, Enabled: true}}
	given := config.Default()
	given.Kafka.Brokers = []string{"kafka.example:9092"}
	given.Kafka.GroupID = "prod"
	given.Kafka.OrdersTopic = "prod-orders"
	given.Kafka.SASL = config.SASL{Mechanism: config.SASLPlain, Username: "u", Password: "p"}
	given.Redis.Addrs = []string{"redis.example:6379"}
	given.Redis.Password = "secret"
	given.Metrics.Listen = ":9464"
	given.Slack.Token = "xoxb-test"
	given.Slack.Channel = "#fraud"
	given.RulesFile = "/etc/fw/rules.yaml"

	tests := []struct {
		name      string
		given     func() *config.Config
		wantRules []string
		wantFrom  string
		wantSlack config.SlackMode
	}{
		{"no config", func() *config.Config { return nil }, builtinNames(t), "built-in demo rules, cmd/fraudwatch/demo/rules.yaml", config.SlackOff},
		{"config without rules", func() *config.Config { c := given; return &c }, builtinNames(t), "built-in demo rules, cmd/fraudwatch/demo/rules.yaml", config.SlackToken},
		{"config with rules", func() *config.Config { c := given; c.Rules = custom; return &c }, []string{"r"}, "from /etc/fw/rules.yaml", config.SlackToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, from, err := buildConfig(tt.given())
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range cfg.Rules {
				names = append(names, r.Name)
			}
			if !slices.Equal(names, tt.wantRules) || from != tt.wantFrom {
				t.Errorf("rules %v from %q, want %v from %q", names, from, tt.wantRules, tt.wantFrom)
			}
			if cfg.Slack.Mode() != tt.wantSlack {
				t.Errorf("slack mode %s, want %s", cfg.Slack.Mode(), tt.wantSlack)
			}
			def := config.Default()
			k := cfg.Kafka
			if k.GroupID != groupID || k.StartOffset != config.StartEarliest || k.OrdersTopic != def.Kafka.OrdersTopic ||
				k.SASL.Mechanism != "" || cfg.Redis.Password != "" || cfg.Metrics.Listen != "127.0.0.1:0" ||
				cfg.ShutdownTimeout != shutdownTimeout {
				t.Errorf("kafka, redis or metrics settings not the demo's own: %+v %+v %+v", k, cfg.Redis, cfg.Metrics)
			}
		})
	}
}

func builtinNames(t *testing.T) []string {
	t.Helper()
	rs, err := config.ParseRules(builtinRules, "rules.yaml")
	if err != nil {
		t.Fatalf("built-in rules: %v", err)
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	return names
}

func sampleAlert() alert.Alert {
	return alert.Alert{
		Rule:        "amount-per-card-10m",
		Description: "A lot of money on one card",
		Severity:    "critical",
		Mode:        "alert",
		Metric:      "amount",
		GroupBy:     []string{"card_fingerprint"},
		GroupValues: []string{"card-1234"},
		Current:     1_250_000,
		Threshold:   1_000_000,
		Currency:    "KRW",
		Window:      10 * time.Minute,
		OrderID:     "ord-100042",
		EventID:     "ev-000042",
		At:          time.Date(2026, 3, 1, 14, 3, 7, 0, time.Local),
	}
}

func TestConsoleFormat(t *testing.T) {
	for _, sev := range alert.Severities {
		if severityStyle[sev] == "" {
			t.Errorf("severity %q has no colour", sev)
		}
	}
	count := sampleAlert()
	count.Rule, count.Severity, count.Metric = "orders-per-customer-1m", "high", "count"
	count.GroupBy, count.GroupValues = []string{"customer_id"}, []string{"cust-1"}
	count.Current, count.Threshold, count.Window = 3, 3, time.Minute

	usd := sampleAlert()
	usd.Currency, usd.Current, usd.Threshold = "USD", 125_050, 100_000

	evidence := count
	for i := 9; i > 0; i-- {
		evidence.Evidence = append(evidence.Evidence, alert.Evidence{OrderID: fmt.Sprint("ord-", i)})
	}

	hostile := sampleAlert()
	hostile.GroupBy = []string{"email", "ip"}
	hostile.GroupValues = []string{"a\x1b[2Jb\n@example.com", "10.0.0.1"}

	tests := []struct {
		name  string
		a     alert.Alert
		color bool
		want  []string
		not   []string
		lines int // 2 unless set
	}{
		{"amount as money", sampleAlert(), false,
			[]string{"14:03:07  ALERT", "CRITICAL", "amount-per-card-10m: A lot of money on one card",
				"card_fingerprint=card-1234", "KRW 1,250,000 within 10m, threshold KRW 1,000,000", "order ord-100042"},
			[]string{"\x1b"}, 0},
		{"count as orders", count, false,
			[]string{"HIGH", "customer_id=cust-1", "3 orders within 1m, threshold 3"}, []string{"\x1b", "KRW"}, 0},
		{"currency scale", usd, false, []string{"USD 1,250.50 within 10m, threshold USD 1,000.00"}, nil, 0},
		{"control characters in values", hostile, false,
			[]string{"email=a?[2Jb?@example.com, ip=10.0.0.1"}, []string{"\x1b", "b\n@"}, 0},
		{"colour by severity", sampleAlert(), true,
			[]string{severityStyle["critical"] + " CRITICAL ", ansiReset, ansiBold + "amount-per-card-10m" + ansiReset}, nil, 0},
		{"colour for high", count, true, []string{severityStyle["high"] + " HIGH "}, nil, 0},
		{"the orders before the crossing", evidence, false, []string{"\n          after ord-8, ord-7, ord-6, ord-5, ord-4 and 3 more\n"}, []string{"ord-9", "ord-3"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			c := &console{out: &output{w: &buf, color: tt.color}}
			if _, err := c.Notify(t.Context(), tt.a); err != nil {
				t.Fatal(err)
			}
			got := buf.String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%q", w, got)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("output has %q:\n%q", n, got)
				}
			}
			lines := cmp.Or(tt.lines, 2)
			if !strings.HasSuffix(got, "\n") || strings.Count(got, "\n") != lines {
				t.Errorf("want a block of %d lines, got %q", lines, got)
			}
			if !tt.color && !alertLine.MatchString(got) {
				t.Errorf("first line does not match the alert pattern: %q", got)
			}
		})
	}
}

// flakySlack fails the first n deliveries.
type flakySlack struct {
	mu    sync.Mutex
	fails int
	calls int
}

func (f *flakySlack) Name() string { return "slack" }

func (f *flakySlack) Notify(context.Context, alert.Alert) (alert.Receipt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.fails {
		return alert.Receipt{}, errors.New("slack: 503 service unavailable")
	}
	return alert.Receipt{}, nil
}

func TestConsoleWithSlackPrintsOnceAndShowsFailures(t *testing.T) {
	var buf bytes.Buffer
	slack := &flakySlack{fails: 2}
	n := &withSlack{console: &console{out: &output{w: &buf}}, slack: slack, printed: map[string]bool{}}
	a := sampleAlert()
	for attempt := 1; attempt <= 3; attempt++ { // as the dispatcher retries
		_, err := n.Notify(t.Context(), a)
		if (err != nil) != (attempt <= 2) {
			t.Fatalf("attempt %d: err = %v", attempt, err)
		}
	}
	out := buf.String()
	if got := len(alertLine.FindAllString(out, -1)); got != 1 {
		t.Errorf("alert printed %d times over the retries, want once:\n%s", got, out)
	}
	if got := strings.Count(out, "Slack delivery failed"); got != 2 {
		t.Errorf("%d Slack failures shown, want 2:\n%s", got, out)
	}
	// A later alert of the same rule with another event is printed again.
	b := sampleAlert()
	b.EventID = "ev-000043"
	if _, err := n.Notify(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if got := len(alertLine.FindAllString(buf.String(), -1)); got != 2 {
		t.Errorf("%d alerts printed, want 2", got)
	}
}

func TestIsTerminal(t *testing.T) {
	regular, err := os.Create(filepath.Join(t.TempDir(), "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	tests := []struct {
		name string
		w    io.Writer
		want bool
	}{
		{"buffer", &bytes.Buffer{}, false},
		{"regular file", regular, false},
		{"nil file", (*os.File)(nil), false},
	}
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		defer null.Close()
		// A character device, like a terminal.
		tests = append(tests, struct {
			name string
			w    io.Writer
			want bool
		}{"character device", null, true})
	}
	for _, tt := range tests {
		if got := IsTerminal(tt.w); got != tt.want {
			t.Errorf("%s: IsTerminal = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// miniredis only ages keys through FastForward: without driveClock, windows
// and cooldowns would never end.
func TestDriveClockExpiresKeys(t *testing.T) {
	t.Parallel() // a second waiting for a TTL
	mr, err := miniredis.Run()
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	stop := driveClock(mr)
	defer stop()
	if err := mr.Set("window", "1"); err != nil {
		t.Fatal(err)
	}
	mr.SetTTL("window", time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for mr.Exists("window") {
		if time.Now().After(deadline) {
			t.Fatal("a key with a 1s TTL still exists after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	stop() // idempotent
}

// The catch-up waits while the pipeline makes progress, however long that
// takes up to its bound, and gives up once it makes none.
func TestCatchingUpWaitsWhileThereIsProgress(t *testing.T) {
	const idle = 500 * time.Millisecond
	for _, tc := range []struct {
		name       string
		doneAfter  time.Duration // 0: never
		stallAfter int           // looks after which progress stops rising; 0: never
		most       time.Duration
		want       bool
	}{
		{name: "caught up at once", doneAfter: time.Nanosecond, most: time.Minute, want: true},
		{name: "slow but progressing", doneAfter: 3 * idle, most: time.Minute, want: true},
		{name: "stalled", stallAfter: 5, most: time.Minute, want: false},
		{name: "progressing past its bound", most: 2 * idle, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, looks := time.Now(), 0
			look := func() (bool, float64) {
				looks++
				progress := looks
				if tc.stallAfter > 0 {
					progress = min(looks, tc.stallAfter)
				}
				return tc.doneAfter > 0 && time.Since(start) >= tc.doneAfter, float64(progress)
			}
			if got := catchingUp(t.Context(), look, idle, tc.most, time.Millisecond); got != tc.want {
				t.Errorf("caught up %v after %d looks in %v, want %v", got, looks, time.Since(start), tc.want)
			}
		})
	}
}

// The clock's steps give way when they are slow, so that they hold
// miniredis's lock a fifth of the time at most.
func TestClockWaitGivesWayToSlowSteps(t *testing.T) {
	for _, tc := range []struct{ took, want time.Duration }{
		{0, clockStep},
		{clockStep / 4, clockStep},
		{clockStep, 4 * clockStep},
		{time.Second, 4 * time.Second},
	} {
		if got := clockWait(tc.took); got != tc.want {
			t.Errorf("after a step of %v: wait %v, want %v", tc.took, got, tc.want)
		}
	}
}
