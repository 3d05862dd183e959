package dispatch_test

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/slack"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// reply scripts one answer of fakeSlack.
type reply struct {
	status     int
	retryAfter string
	body       string
	hang       bool            // never answer; the client must give up
	gate       <-chan struct{} // answer once this is closed
}

// fakeSlack is a Slack endpoint (an incoming webhook, or chat.postMessage
// when the script answers JSON) that records what reached it and when.
type fakeSlack struct {
	*httptest.Server
	script func(n int) reply

	mu        sync.Mutex
	arrivals  []time.Time
	answered  []time.Time // when each answer was written; zero if none
	bodies    []string
	delivered int // requests answered with success
}

func newFakeSlack(t *testing.T, script func(n int) reply) *fakeSlack {
	t.Helper()
	f := &fakeSlack{script: script}
	stop := make(chan struct{})
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets net/http notice a client that hangs up.
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.arrivals)
		f.arrivals = append(f.arrivals, time.Now())
		f.answered = append(f.answered, time.Time{})
		f.bodies = append(f.bodies, string(body))
		f.mu.Unlock()

		rep := f.script(n)
		if rep.hang {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		if rep.gate != nil {
			select {
			case <-rep.gate:
			case <-stop:
				return
			}
		}
		if rep.retryAfter != "" {
			w.Header().Set("Retry-After", rep.retryAfter)
		}
		if rep.status == 0 {
			rep.status = http.StatusOK
		}
		if rep.body == "" {
			rep.body = "ok"
		}
		f.mu.Lock()
		f.answered[n] = time.Now()
		if rep.status == http.StatusOK && !strings.Contains(rep.body, `"ok":false`) {
			f.delivered++
		}
		f.mu.Unlock()
		w.WriteHeader(rep.status)
		_, _ = io.WriteString(w, rep.body)
	}))
	t.Cleanup(f.Close)
	t.Cleanup(func() { close(stop) }) // before f.Close, which waits for handlers
	return f
}

func (f *fakeSlack) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.arrivals)
}

func (f *fakeSlack) allBodies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

func (f *fakeSlack) deliveredCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delivered
}

// webhook returns a webhook-mode notifier posting to f.
func (f *fakeSlack) webhook(t *testing.T) alert.Notifier {
	t.Helper()
	n, err := slack.New(slack.Config{WebhookURL: f.URL + testWebhookPath, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// token returns a bot-token notifier posting to f.
func (f *fakeSlack) token(t *testing.T) alert.Notifier {
	t.Helper()
	n, err := slack.New(slack.Config{Token: testToken, Channel: "#fraud-alerts", APIURL: f.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

const okJSON = `{"ok":true,"channel":"C1","ts":"1.2"}`

type testEnv struct {
	d       *dispatch.Dispatcher
	log     *slog.Logger // the dispatcher's; nil discards
	reg     *prometheus.Registry
	rdb     redis.UniversalClient
	scripts *lua.Scripts
	pfx     string
	keys    lua.Keys
}

// testDispatcher returns a dispatcher with small backoffs, the real claim
// scripts on a real Redis, and its own registry.
func testDispatcher(t *testing.T, n alert.Notifier, cfg dispatch.DispatcherConfig) *testEnv {
	t.Helper()
	return testDispatcherLogging(t, n, cfg, nil)
}

// testDispatcherLogging is testDispatcher with the dispatcher's logger.
func testDispatcherLogging(t *testing.T, n alert.Notifier, cfg dispatch.DispatcherConfig, log *slog.Logger) *testEnv {
	t.Helper()
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 5 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 20 * time.Millisecond
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = 10 * time.Second
	}
	if cfg.ChannelBudget == (lua.Budget{}) && cfg.OverallBudget == (lua.Budget{}) {
		// A budget no test meets unless it sets one (TestFloodKeepsToTheBudget).
		cfg.ChannelBudget, cfg.OverallBudget = lua.Budget{Rate: 1000, Burst: 1000}, lua.Budget{Rate: 1000, Burst: 1000}
	}
	env := &testEnv{reg: prometheus.NewRegistry(), rdb: redistest.Client(t), pfx: cfg.KeyPrefix, log: log}
	if env.pfx == "" {
		env.pfx = redistest.Prefix(t) // a replica of its own; a given prefix shares another's Redis state
	}
	scripts, err := lua.New(lua.Config{}, env.rdb, env.reg)
	if err != nil {
		t.Fatal(err)
	}
	env.scripts = scripts
	// The keys the engine counts in: as many buckets as the dispatcher's.
	if env.keys, err = lua.NewKeysIn(env.pfx, cmp.Or(cfg.Buckets, lua.Buckets)); err != nil {
		t.Fatal(err)
	}
	cfg.KeyPrefix = env.pfx
	d, err := dispatch.NewDispatcher(cfg, n, scripts, log, env.reg)
	if err != nil {
		t.Fatalf("NewDispatcher: %v", err)
	}
	env.d = d
	return env
}

// testFingerprint is the definition of the test alerts' rules.
const testFingerprint = "0badcafe"

// knowRule makes the dispatcher deliver the sample alert's rule, with its
// settings, as HandleMessages requires.
func (e *testEnv) knowRule() {
	a := sampleAlert()
	e.d.SetRules(map[string]dispatch.RuleSettings{a.Rule: settingsOf(a)})
}

// settingsOf is the rule of an alert as the dispatcher takes it.
func settingsOf(a alert.Alert) dispatch.RuleSettings {
	return dispatch.RuleSettings{Mode: a.Mode, Cooldown: a.Cooldown, Channel: a.Channel, Description: a.Description,
		Severity: a.Severity, Threshold: a.Threshold, Fingerprint: testFingerprint, Metric: a.Metric,
		GroupBy: []string{"card_fingerprint"}, Window: a.Window, WindowType: a.WindowType}
}

// cross writes the crossing marks of alerts as the counting scripts do,
// and the seal of each sealed one as the engine does: Redis then holds
// that each crossed, at its value, and that fraudwatch published it as it
// reads.
func (e *testEnv) cross(t *testing.T, alerts ...alert.Alert) {
	t.Helper()
	for _, a := range alerts {
		g, err := e.keys.ParseGroup(a.Group)
		if err != nil {
			t.Fatal(err)
		}
		id, marks := lua.IDOf(a.EventID), e.keys.Marks(g, a.Rule+"."+a.Definition)
		if err := e.rdb.HSet(t.Context(), marks, string(id[:]), a.Current).Err(); err != nil {
			t.Fatal(err)
		}
		if a.Sealed() {
			e.seal(t, marks, a)
		}
	}
}

// seal writes a's seal into marks, as the engine does before it publishes
// a.
func (e *testEnv) seal(t *testing.T, marks string, a alert.Alert) {
	t.Helper()
	h := a.Seal()
	if err := e.scripts.Seal(t.Context(), e.keys.SealsSince(), []lua.Seal{{Marks: marks, ID: lua.IDOf(a.EventID), Hash: h[:], At: a.PublishedAt}}); err != nil {
		t.Fatal(err)
	}
}

// message is a's message on the alerts topic, at offset, its crossing
// marked in Redis.
func (e *testEnv) message(t *testing.T, a alert.Alert, offset int64) kafka.Message {
	t.Helper()
	e.cross(t, a)
	return kafka.Message{Topic: "alerts", Offset: offset, Time: time.Now(), Value: encode(a)}
}

// scriptedBudget is the scripts, but the alert budget answers as scripted:
// each answer once, then "taken" for ever. calls counts what was asked.
type scriptedBudget struct {
	*lua.Scripts
	mu      sync.Mutex
	answers []bool
	calls   int
}

func (s *scriptedBudget) TakeBudget(context.Context, string, string, lua.Budget, lua.Budget) (bool, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.answers) == 0 {
		return true, 0, nil
	}
	ok := s.answers[0]
	s.answers = s.answers[1:]
	return ok, time.Millisecond, nil
}

// withBudget replaces e's dispatcher by one delivering through n whose
// alert budget answers as scripted, with the sample alert's rule.
func (e *testEnv) withBudget(t *testing.T, n alert.Notifier, answers ...bool) *scriptedBudget {
	t.Helper()
	sb := &scriptedBudget{Scripts: e.scripts, answers: answers}
	e.reg = prometheus.NewRegistry()
	cfg := dispatch.DispatcherConfig{KeyPrefix: e.pfx, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxAttempts: 4}
	d, err := dispatch.NewDispatcher(cfg, n, sb, e.log, e.reg)
	if err != nil {
		t.Fatal(err)
	}
	e.d = d
	e.knowRule()
	return sb
}

// handleOne handles one message of the alerts topic; nil means it may be
// committed.
func handleOne(ctx context.Context, d *dispatch.Dispatcher, msg kafka.Message) error {
	_, err := d.HandleMessages(ctx, []kafka.Message{msg})
	return err
}

// total sums every series of a counter.
func (e *testEnv) total(t *testing.T, name string) float64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// alert returns an alert of group under the test's prefix, crossed by
// eventID, with its keys as the engine makes them, published now.
func (e *testEnv) alert(group, eventID string) alert.Alert {
	a := sampleAlert()
	a.PublishedAt = time.UnixMilli(time.Now().UnixMilli()).UTC()
	a.EventID = eventID
	a.ID = a.Rule + "/" + eventID
	a.GroupBy, a.GroupValues = []string{"card_fingerprint"}, []string{group}
	g := e.keys.Group(a.GroupValues)
	a.Group = g.Encoding()
	a.Definition = testFingerprint
	a.CooldownKey = e.keys.Cooldown(g, a.Rule)
	a.RecordKey = e.keys.AlertRecord(g, a.Rule, eventID)
	a.SilenceKey, a.RuleSilence = e.keys.Silences(g, a.Rule), e.keys.RuleSilences(g, a.Rule)
	return a
}

// deliver hands a to the dispatcher as the alerts topic does, its
// crossing marked and its rule in force with a's settings; nil means the
// message may be committed.
func (e *testEnv) deliver(t *testing.T, a alert.Alert) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.d.SetRules(map[string]dispatch.RuleSettings{a.Rule: settingsOf(a)})
	return handleOne(ctx, e.d, e.message(t, a, 1))
}

// metric reads one series from the registry; a missing series reads 0.
func (e *testEnv) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// series counts the label sets of a metric, so that a test can tell "one
// series at 1" from "the right series at 1 and another one too".
func (e *testEnv) series(t *testing.T, name string) int {
	t.Helper()
	n, err := testutil.GatherAndCount(e.reg, name)
	if err != nil {
		t.Fatalf("count %s: %v", name, err)
	}
	return n
}

type fakeDeadLetters struct {
	whys []string
	err  error
}

func (f *fakeDeadLetters) DeadLetter(_ context.Context, _ kafka.Message, why string) error {
	if f.err != nil {
		return f.err
	}
	f.whys = append(f.whys, why)
	return nil
}

// logLine is the JSON log line of msg in logs, decoded.
func logLine(t *testing.T, logs, msg string) map[string]any {
	t.Helper()
	lines := logLines(logs, msg)
	if len(lines) == 0 {
		t.Fatalf("no log line %q in:\n%s", msg, logs)
	}
	return lines[0]
}

func encode(a alert.Alert) []byte {
	b, err := json.Marshal(a)
	if err != nil {
		panic(err)
	}
	return b
}

// recordKey is the key of a's record for the receiver.
func (e *testEnv) recordKey(t *testing.T, a alert.Alert, receiver string) string {
	t.Helper()
	g, err := e.keys.ParseGroup(a.Group)
	if err != nil {
		t.Fatal(err)
	}
	return e.keys.Record(g, a.Rule, a.EventID, receiver)
}

// alertKey is the key of a's hash: its decision and life.
func (e *testEnv) alertKey(t *testing.T, a alert.Alert) string {
	t.Helper()
	g, err := e.keys.ParseGroup(a.Group)
	if err != nil {
		t.Fatal(err)
	}
	return e.keys.Alert(g, a.Rule, a.EventID)
}

// claim claims a for the receiver as claimant, with no cooldown, as the
// dispatcher would.
func (e *testEnv) claim(t *testing.T, a alert.Alert, receiver, claimant string) lua.Claim {
	t.Helper()
	c, err := e.scripts.ClaimAlert(t.Context(), lua.AlertClaim{CooldownKey: a.CooldownKey, RecordKey: e.recordKey(t, a, receiver),
		LegacyKey: a.RecordKey, AlertKey: e.alertKey(t, a), ID: a.ID, Claimant: claimant})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// record reads a's record for the receiver.
func (e *testEnv) record(t *testing.T, a alert.Alert, receiver string) lua.Record {
	t.Helper()
	r, err := e.scripts.Record(t.Context(), e.recordKey(t, a, receiver), a.RecordKey)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
