package status

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/rules"
)

type fakeSource struct {
	version  string
	rules    []rules.Rule
	recent   []dispatch.Settled
	silences []silence.Silence
	err      error
	lag      []Lag
	reload   Reload
	open     Open
	openErr  error
	quality  []outcome.RuleQuality
	qualErr  error
}

func (f *fakeSource) Open(context.Context) (Open, error) { return f.open, f.openErr }
func (f *fakeSource) Quality(context.Context, time.Time) ([]outcome.RuleQuality, error) {
	return f.quality, f.qualErr
}

func (f *fakeSource) Rules() (string, []rules.Rule) { return f.version, f.rules }
func (f *fakeSource) Recent() []dispatch.Settled    { return f.recent }
func (f *fakeSource) Silences(context.Context) ([]silence.Silence, error) {
	return f.silences, f.err
}
func (f *fakeSource) Lag() []Lag     { return f.lag }
func (f *fakeSource) Reload() Reload { return f.reload }

const hostile = `<script>alert(1)</script>`

func sample() *fakeSource {
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	floor := int64(10_000)
	return &fakeSource{
		reload:  Reload{File: "/etc/fraudwatch/rules.yaml", At: at.Add(-time.Hour), Why: "signal", Result: "unchanged", Since: at.Add(-2 * time.Hour)},
		version: "0cdd29e7d71e",
		rules: []rules.Rule{
			{Name: "orders-per-customer", Metric: alert.Count, GroupBy: []string{"customer_id"}, WindowType: alert.Fixed,
				Window: time.Minute, Threshold: 3, Cooldown: 10 * time.Minute, Severity: alert.SeverityHigh, Mode: alert.ModeAlert, Enabled: true, Evidence: 10},
			{Name: "cards-per-customer", Metric: alert.Distinct, Field: "card_fingerprint", GroupBy: []string{"customer_id"}, WindowType: alert.Sliding,
				Window: time.Hour, Threshold: 4, Severity: alert.SeverityWarning, Mode: alert.ModeShadow, Enabled: true,
				Where: []rules.Condition{{Field: "currency", In: []string{"KRW", "USD"}}, {Field: "amount", GTE: &floor}, {Field: "note", NotIn: []string{hostile}}}},
		},
		recent: []dispatch.Settled{
			{At: at, Rule: "orders-per-customer", ID: "orders-per-customer/e3", OrderID: hostile, GroupBy: []string{"customer_id"},
				Metric: alert.Count, Current: 3, Threshold: 3, Outcome: dispatch.OutcomeSent},
			{At: at.Add(-time.Minute), Rule: "amount", OrderID: "ord-9", GroupBy: []string{"card_fingerprint"},
				Metric: alert.Amount, Current: 1_250_000, Threshold: 1_000_000, Currency: "KRW", Outcome: dispatch.SuppressedCooldown},
		},
		silences: []silence.Silence{
			{ID: "s1", Rule: "orders-per-customer", Match: map[string]string{"customer_id": "cust-secret-42"}, Reason: hostile, Author: "kim", Ends: at.Add(time.Hour)},
			{ID: "s2", Rule: "cards-per-customer", Reason: "tuning", Ends: at.Add(2 * time.Hour)},
		},
		lag: []Lag{{"orders", 10, 7}, {"orders", 2, 0}, {"alerts", 0, 1}},
		open: Open{ByRule: map[string]int{"orders-per-customer": 3, "amount": 1}, Newest: []life.Entry{
			{ID: "orders-per-customer/e7", State: alert.State{Status: alert.StatusAcknowledged, OpenedAt: at, AckedBy: "slack:" + hostile},
				Alert: alert.Alert{Severity: alert.SeverityHigh, GroupValues: []string{"cust-secret-42"}}},
		}, Acks: map[string]Acks{"orders-per-customer": {Acknowledged: 2, Median: 4 * time.Minute, Waiting: 1, Oldest: 90 * time.Minute}}},
		quality: []outcome.RuleQuality{
			// 30 days first: the page sets them out by period, not as given.
			{Rule: "orders-per-customer", Period: 30 * 24 * time.Hour, Alerts: 40, WithOutcome: 20, Fraud: 15, Legit: 5,
				Precision: ptr(0.75), FraudOrders: 30, Caught: 18, Missed: 12, Truncated: true},
			{Rule: "orders-per-customer", Period: 7 * 24 * time.Hour, Alerts: 9, WithOutcome: 4, Fraud: 1, Legit: 3,
				Precision: ptr(0.25), FraudOrders: 6, Caught: 2, Missed: 4},
			{Rule: "amount", Period: 7 * 24 * time.Hour, Alerts: 2, FraudOrders: 6, Missed: 6},
			{Rule: "amount", Period: 30 * 24 * time.Hour, Alerts: 3, FraudOrders: 30, Missed: 30},
		},
	}
}

func ptr(f float64) *float64 { return &f }

func get(t *testing.T, src Source, path string) (*http.Response, string) {
	t.Helper()
	return getFrom(t, Handler(src, nil), path)
}

func getFrom(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestStatusPage(t *testing.T) {
	withErr := sample()
	withErr.silences, withErr.err = nil, errors.New("redis: connection refused")
	empty := &fakeSource{version: "abc"}
	refused := sample()
	refused.reload = Reload{File: "/etc/fraudwatch/rules.yaml", At: time.Date(2026, 12, 1, 9, 45, 0, 0, time.UTC), Why: "file changed",
		Result: "invalid", Err: `/etc/fraudwatch/rules.yaml: rule "burst": window: "90" is not a duration ` + hostile, Since: refused.reload.Since}
	long := sample()
	long.reload = Reload{File: "rules.yaml", At: time.Now(), Why: "signal", Result: "invalid", Err: "x" + strings.Repeat("é", maxErr) + "THE-END"}
	taken := sample()
	taken.reload.Result = "ok"
	openErr := sample()
	openErr.open, openErr.openErr = Open{}, errors.New("redis: connection refused")
	qualErr := sample()
	qualErr.quality, qualErr.qualErr = nil, errors.New("redis: connection refused")
	tests := []struct {
		name string
		src  *fakeSource
		want []string
		not  []string
	}{
		{"everything", sample(), []string{
			"version 0cdd29e7d71e",
			"<td>orders-per-customer</td><td>alert</td><td>high</td>",
			"<td>distinct card_fingerprint</td><td>customer_id</td>", "<td>sliding 1h</td>", "<td>none</td>",
			"KRW 1,250,000", "ord-9", `class="cooldown">cooldown`, `class="sent">sent`,
			"one group by customer_id", "the whole rule", "2026-12-01 10:30:00Z",
			"&lt;script&gt;alert(1)&lt;/script&gt;",
			"<td>alerts</td><td class=\"num\">0</td><td class=\"num\">1</td>",
			// where: as check's table shows it, "-" for none.
			`<td class="num">10</td><td>-</td></tr>`,
			`<td>currency in KRW|USD; amount &gt;= 10000; note not &lt;script&gt;alert(1)&lt;/script&gt;</td>`,
			// The last reading of the rules file, taken.
			"version 0cdd29e7d71e, since 2026-12-01 07:30:00Z",
			"/etc/fraudwatch/rules.yaml last read at 2026-12-01 08:30:00Z (signal): taken, it holds the rules in force.",
			// Open alerts of every replica: per rule, and the newest.
			`<tr><td>amount</td><td class="num">1</td>`, `<tr><td>orders-per-customer</td><td class="num">3</td>`,
			// How they stand with acknowledgement, from Redis.
			`<td class="num">2</td><td class="num">4m</td>` + "\n" + `<td class="num">1</td><td class="num">1h30m</td></tr>`,
			`<td>2026-12-01 09:30:00Z</td><td>orders-per-customer/e7</td><td>high</td>`,
			`<td class="acknowledged">acknowledged</td><td>slack:&lt;script&gt;`,
			// Each rule's quality: 7 days, then 30; no verdict yet is a dash.
			`<tr><td>amount</td><td class="num">2</td><td class="num">0</td>` + "\n" +
				`<td class="num">–</td><td class="num">0</td><td class="num">6</td><td class="num">3</td>`,
			`<tr><td>orders-per-customer</td><td class="num">9</td><td class="num">4</td>` + "\n" +
				`<td class="num">25%</td><td class="num">2</td><td class="num">4</td><td class="num">40</td><td class="num">20</td>` + "\n" +
				`<td class="num">75%</td><td class="num">18</td><td class="num">12 (newest only)</td></tr>`,
		}, []string{"<script>", "cust-secret-42", "redis: connection refused", "refused", "No open alert.", "No alert or outcome"}},
		{"reload taken", taken, []string{"(signal): taken, its rules are in force."}, []string{"refused"}},
		{"reload refused", refused, []string{
			"The last reading of /etc/fraudwatch/rules.yaml, at 2026-12-01 09:45:00Z (file changed), was refused (invalid).",
			"The rules in force stay the ones below",
			`<pre class="error">/etc/fraudwatch/rules.yaml: rule &#34;burst&#34;: window: &#34;90&#34; is not a duration &lt;script&gt;alert(1)&lt;/script&gt;</pre>`,
			"version 0cdd29e7d71e, since 2026-12-01 07:30:00Z",
		}, []string{"<script>", "taken"}},
		{"refusal bounded", long, []string{"was refused (invalid)", "é … (2009 more bytes: the log has the whole error)</pre>"}, []string{"THE-END", "\ufffd"}},
		{"rules not from a file", empty, []string{"The rules were not read from a file: nothing reloads them."}, []string{", since", "last read"}},
		{"silences unreadable", withErr, []string{"silences could not be read from Redis", "orders-per-customer"}, []string{"connection refused", "No silence runs"}},
		{"nothing yet", empty, []string{"No alert settled since this process started", "No silence runs", "This process holds no partition",
			"No open alert.", "No alert or outcome recorded in the last 30 days."}, nil},
		{"outcomes unreadable", qualErr, []string{"the rules&#39; outcomes could not be read from Redis"}, []string{"connection refused", "No alert or outcome"}},
		{"open alerts unreadable", openErr, []string{"open alerts could not be read from Redis", "orders-per-customer"}, []string{"connection refused", "No open alert."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, tt.src, "/")
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
				!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
				t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
			}
			if !utf8.ValidString(body) {
				t.Error("the page is not UTF-8")
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(body, n) {
					t.Errorf("page shows %q", n)
				}
			}
		})
	}
	// Partitions in order: alerts 0, orders 2, orders 10.
	_, body := get(t, sample(), "/")
	body = body[strings.Index(body, `id="lag"`):]
	a, o2, o10 := strings.Index(body, "<td>alerts</td>"), strings.Index(body, `<td class="num">2</td>`), strings.Index(body, `<td class="num">10</td>`)
	if !(a >= 0 && a < o2 && o2 < o10) {
		t.Errorf("lag rows out of order: %d %d %d", a, o2, o10)
	}
	if resp, _ := get(t, sample(), "/other"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /other = %d, want 404", resp.StatusCode)
	}
}

// slowSource is a Source whose section slow takes all the time it is
// given, as a Redis on a loaded machine may; the others fail on a deadline
// already passed, as go-redis does before it sends.
type slowSource struct {
	*fakeSource
	slow string
}

func (s slowSource) read(ctx context.Context, section string) error {
	if section == s.slow {
		<-ctx.Done()
	}
	return ctx.Err()
}

func (s slowSource) Silences(ctx context.Context) ([]silence.Silence, error) {
	if err := s.read(ctx, "silences"); err != nil {
		return nil, err
	}
	return s.fakeSource.Silences(ctx)
}

func (s slowSource) Open(ctx context.Context) (Open, error) {
	if err := s.read(ctx, "open"); err != nil {
		return Open{}, err
	}
	return s.fakeSource.Open(ctx)
}

func (s slowSource) Quality(ctx context.Context, now time.Time) ([]outcome.RuleQuality, error) {
	if err := s.read(ctx, "quality"); err != nil {
		return nil, err
	}
	return s.fakeSource.Quality(ctx, now)
}

// Each section read from Redis has a deadline of its own: one that takes
// all its time is said to be missing, and the sections read after it show.
func TestStatusPageSectionsReadApart(t *testing.T) {
	missing := map[string]string{
		"silences": "silences could not be read",
		"open":     "open alerts could not be read",
		"quality":  "outcomes could not be read",
	}
	for _, slow := range []string{"silences", "open", "quality"} {
		t.Run(slow, func(t *testing.T) {
			_, body := getFrom(t, handler(slowSource{sample(), slow}, nil, 50*time.Millisecond), "/")
			for section, says := range missing {
				if strings.Contains(body, says) != (section == slow) {
					t.Errorf("%s slow: the page says %q: %v, want %v", slow, says, !(section == slow), section == slow)
				}
			}
		})
	}
}

// Open alerts by acknowledgement: the median time to acknowledge of those
// acknowledged, and the oldest of those waiting, per rule.
func TestAcksOf(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	entry := func(rule string, status alert.Status, opened, acked time.Duration) life.Entry {
		st := alert.State{Status: status, OpenedAt: now.Add(-opened)}
		if status == alert.StatusAcknowledged {
			st.AckedAt = st.OpenedAt.Add(acked)
		}
		return life.Entry{Ref: alert.Ref{Rule: rule}, State: st}
	}
	got := AcksOf([]life.Entry{
		entry("a", alert.StatusAcknowledged, time.Hour, time.Minute),
		entry("a", alert.StatusAcknowledged, time.Hour, 9*time.Minute),
		entry("a", alert.StatusAcknowledged, time.Hour, 3*time.Minute),
		entry("a", alert.StatusOpen, 20*time.Minute, 0),
		entry("a", alert.StatusOpen, 50*time.Minute, 0),
		entry("b", alert.StatusOpen, 5*time.Minute, 0),
	}, now)
	want := map[string]Acks{
		"a": {Acknowledged: 3, Median: 3 * time.Minute, Waiting: 2, Oldest: 50 * time.Minute},
		"b": {Waiting: 1, Oldest: 5 * time.Minute},
	}
	if !maps.Equal(got, want) {
		t.Errorf("AcksOf = %+v, want %+v", got, want)
	}
}
