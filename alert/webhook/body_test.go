package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/webhook"
)

// A template's body is sent, signed, with the configured content type.
func TestATemplatesBodyIsSentSigned(t *testing.T) {
	secret := newSecret(t)
	s := newStandIn(t)
	n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{secret}, ContentType: "text/plain; charset=utf-8",
		Template: `{{.Type}} {{.Alert.Rule}} [{{.Alert.Severity}}] {{.Alert.CurrentText}} ≥ {{.Alert.ThresholdText}}` +
			`{{range $i, $f := .Alert.GroupBy}} {{$f}}={{index $.Alert.GroupValues $i}}{{end}} {{json .Alert.Description}} {{.MessageID}}`})
	if _, err := n.Notify(context.Background(), sample()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	r := s.last(t)
	want := `alert.created amount-per-card-10m [critical] KRW 1,250,000 ≥ KRW 1,000,000 card_fingerprint=fp_9f8e7d ` +
		`email=kim@example.com "More than 1,000,000 won paid by one card within 10 minutes" ` + r.header.Get("webhook-id")
	if string(r.body) != want {
		t.Errorf("body\n%s\nwant\n%s", r.body, want)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if err := verifier(t, secret).Verify(r.body, r.header); err != nil {
		t.Errorf("verify: %v", err)
	}
}

// A template that fails on an alert (an index past its values) gives the
// alert up: it would fail again.
func TestATemplateThatFailsOnAnAlertIsPermanent(t *testing.T) {
	s := newStandIn(t)
	n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{newSecret(t)}, Template: `{{index .Alert.GroupValues 1}}`})
	a := sample()
	a.GroupBy, a.GroupValues = a.GroupBy[:1], a.GroupValues[:1]
	_, err := n.Notify(context.Background(), a)
	if retry, _ := alert.RetryPolicy(err); err == nil || retry {
		t.Errorf("Notify: %v, retry %v; want a permanent error", err, retry)
	}
	if len(s.requests()) != 0 {
		t.Error("something was sent")
	}
}

// Validate names what is wrong, and never a secret.
func TestValidateNamesTheProblem(t *testing.T) {
	good := newSecret(t)
	short := "whsec_" + strings.Repeat("QUJD", 4) // 12 bytes
	for _, tc := range []struct {
		name string
		cfg  webhook.Config
		want string
	}{
		{name: "ok", cfg: webhook.Config{Name: "cases", URL: "https://cases.example/hook", Secrets: []string{good}}},
		{name: "ok template", cfg: webhook.Config{Name: "cases", URL: "https://cases.example/hook", Secrets: []string{good}, Template: `{{json .Alert}}`, ContentType: "application/vnd.case+json"}},
		{name: "ok docs' example", cfg: webhook.Config{Name: "cases", URL: "https://cases.example/hook", Secrets: []string{good},
			Template: `{"text": {{json (printf "[%s] %s: %s ≥ %s" .Alert.Severity .Alert.Rule .Alert.CurrentText .Alert.ThresholdText)}},` +
				"\n" + `"alert_id": {{json .Alert.ID}}, "event": {{json .Type}}}`}},
		{name: "name", cfg: webhook.Config{Name: "Cases!", URL: "https://x.example", Secrets: []string{good}}, want: `name "Cases!"`},
		{name: "no url", cfg: webhook.Config{Name: "cases", Secrets: []string{good}}, want: "url is required"},
		{name: "relative url", cfg: webhook.Config{Name: "cases", URL: "/hook", Secrets: []string{good}}, want: "absolute http(s)"},
		{name: "ftp", cfg: webhook.Config{Name: "cases", URL: "ftp://x.example/", Secrets: []string{good}}, want: "absolute http(s)"},
		{name: "no secret", cfg: webhook.Config{Name: "cases", URL: "https://x.example"}, want: "at least one secret"},
		{name: "no prefix", cfg: webhook.Config{Name: "cases", URL: "https://x.example", Secrets: []string{good, strings.TrimPrefix(good, "whsec_")}}, want: "secrets[1] does not start with whsec_"},
		{name: "not base64", cfg: webhook.Config{Name: "cases", URL: "https://x.example", Secrets: []string{"whsec_%%%%NOTB64"}}, want: "secrets[0] is not whsec_ and standard base64"},
		{name: "short", cfg: webhook.Config{Name: "cases", URL: "https://x.example", Secrets: []string{short}}, want: "secrets[0] is 12 bytes"},
		{name: "too many", cfg: webhook.Config{Name: "cases", URL: "https://x.example", Secrets: []string{good, good, good, good, good}}, want: "at most 4"},
		{name: "parse", cfg: webhook.Config{Name: "cases", URL: "https://x.example", Secrets: []string{good}, Template: "{\"rule\": {{.Alert.Rule}\n"}, want: "template does not parse: template: body:1: bad character"},
		{name: "unknown field", cfg: webhook.Config{Name: "cases", URL: "https://x.example", Secrets: []string{good}, Template: "{{.Alert.Customer}}"}, want: "template does not render an alert: template: body:1:8: executing \"body\" at <.Alert.Customer>: can't evaluate field Customer"},
		{name: "content type without template", cfg: webhook.Config{Name: "cases", URL: "https://x.example", Secrets: []string{good}, ContentType: "text/plain"}, want: "content_type \"text/plain\" is a template's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), strings.TrimPrefix(good, "whsec_")) || strings.Contains(err.Error(), "QUJD") || strings.Contains(err.Error(), "NOTB64") {
				t.Errorf("the error shows a secret: %v", err)
			}
			if _, nerr := webhook.New(tc.cfg); nerr == nil {
				t.Error("New took it")
			}
		})
	}
}

// Update posts each change with its type and the whole state; a state
// with nothing to show posts nothing; one it does not know is refused.
func TestUpdatePostsTheChange(t *testing.T) {
	a := sample()
	at := a.At.Add(time.Minute)
	for _, tc := range []struct {
		name string
		st   alert.State
		typ  string // "" posts nothing
		ts   time.Time
		err  bool
	}{
		{name: "acknowledged", st: alert.State{Status: alert.StatusAcknowledged, AckedBy: "slack:U1", AckedAt: at}, typ: "alert.acknowledged", ts: at},
		{name: "resolved", st: alert.State{Status: alert.StatusResolved, ResolvedBy: "cli:alice", ResolvedAt: at.Add(time.Hour)}, typ: "alert.resolved", ts: at.Add(time.Hour)},
		{name: "assigned", st: alert.State{Status: alert.StatusOpen, Assignee: "slack:U2"}, typ: "alert.assigned"},
		{name: "open", st: alert.State{Status: alert.StatusOpen}},
		{name: "labelled while open", st: alert.State{Status: alert.StatusOpen, Label: alert.LabelFraud, LabelledBy: "slack:U3", LabelledAt: at},
			typ: "alert.labelled", ts: at},
		{name: "labelled after its resolution", st: alert.State{Status: alert.StatusResolved, ResolvedBy: "cli:alice", ResolvedAt: at,
			Label: alert.LabelLegit, LabelledBy: "slack:U3", LabelledAt: at.Add(time.Hour)}, typ: "alert.labelled", ts: at.Add(time.Hour)},
		{name: "resolved after its label", st: alert.State{Status: alert.StatusResolved, ResolvedBy: "cli:alice", ResolvedAt: at.Add(time.Hour),
			Label: alert.LabelLegit, LabelledBy: "slack:U3", LabelledAt: at}, typ: "alert.resolved", ts: at.Add(time.Hour)},
		{name: "unknown", st: alert.State{Status: "snoozed"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret := newSecret(t)
			s := newStandIn(t)
			n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{secret}})
			err := n.Update(context.Background(), a, tc.st, alert.Receipt{})
			if tc.err {
				if retry, _ := alert.RetryPolicy(err); err == nil || retry {
					t.Fatalf("Update: %v, want a permanent error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			got := s.requests()
			if tc.typ == "" {
				if len(got) != 0 {
					t.Fatalf("%d requests, want none", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d requests, want 1", len(got))
			}
			if err := verifier(t, secret).Verify(got[0].body, got[0].header); err != nil {
				t.Errorf("verify: %v", err)
			}
			var m webhook.Message
			if err := json.Unmarshal(got[0].body, &m); err != nil {
				t.Fatal(err)
			}
			if m.Type != tc.typ || m.State != inUTC(tc.st) || m.Alert.ID != a.ID {
				t.Errorf("type %s, state %+v, alert %s", m.Type, m.State, m.Alert.ID)
			}
			if !tc.ts.IsZero() && !m.Timestamp.Equal(tc.ts) {
				t.Errorf("timestamp %s, want %s", m.Timestamp, tc.ts)
			}
		})
	}
}

// No alert breaks a message: an empty one is sent; a huge one is sent
// bounded (20 orders of evidence, texts cut).
func TestNoAlertBreaksTheBody(t *testing.T) {
	huge := sample()
	big := strings.Repeat("x", 1<<20)
	huge.ID, huge.Rule, huge.Description, huge.OrderID, huge.Currency = big, big, big, big, big
	huge.Current, huge.Threshold, huge.Window = -1<<63, 1<<63-1, -time.Hour
	huge.Severity, huge.Metric, huge.WindowType = alert.Severity(big), alert.Metric(big), alert.WindowType(big)
	huge.GroupBy, huge.GroupValues = make([]string, 1000), make([]string, 5)
	for i := range huge.GroupBy {
		huge.GroupBy[i] = big
	}
	huge.Evidence = make([]alert.Evidence, 1000)
	for i := range huge.Evidence {
		huge.Evidence[i] = alert.Evidence{OrderID: big, EventID: big, Value: big}
	}
	huge.Links = make([]alert.Link, 1000)
	for i := range huge.Links {
		huge.Links[i] = alert.Link{Text: big, URL: "https://x.example/" + big[:100]}
	}
	huge.Links[0].URL = "https://x.example/" + big
	for _, tc := range []struct {
		name string
		a    alert.Alert
	}{{"empty", alert.Alert{}}, {"huge", huge}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStandIn(t)
			n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{newSecret(t)}})
			if _, err := n.Notify(context.Background(), tc.a); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			for _, st := range []alert.State{{Status: alert.StatusResolved}, {Status: alert.StatusOpen, Assignee: big}} {
				if err := n.Update(context.Background(), tc.a, st, alert.Receipt{}); err != nil {
					t.Fatalf("Update: %v", err)
				}
			}
			r := s.requests()[0]
			if len(r.body) > 200<<10 {
				t.Errorf("a body of %d bytes", len(r.body))
			}
			var m webhook.Message
			if err := json.Unmarshal(r.body, &m); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if len(m.Alert.Evidence) > alert.MaxEvidence || len(m.Alert.Links) > 10 || len(m.Alert.GroupBy) > alert.MaxGroupFields {
				t.Errorf("%d evidence, %d links, %d group fields", len(m.Alert.Evidence), len(m.Alert.Links), len(m.Alert.GroupBy))
			}
			if m.Alert.Evidence == nil || m.Alert.Links == nil || m.Alert.GroupValues == nil {
				t.Error("a list is null")
			}
			if tc.name == "huge" && (len(m.Alert.Evidence) != alert.MaxEvidence || len(m.Alert.Links) != 9) {
				t.Errorf("%d evidence, %d links; want 20 and 9 (the one too long to cut left out)", len(m.Alert.Evidence), len(m.Alert.Links))
			}
		})
	}
}

// A template that writes without bound is stopped at MaxBodyBytes.
func TestATemplatesBodyIsBounded(t *testing.T) {
	s := newStandIn(t)
	n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{newSecret(t)},
		Template: `{{range .Alert.GroupValues}}{{range $.Alert.GroupValues}}{{$.Alert.Description}}{{end}}{{end}}`})
	a := sample()
	a.Description = strings.Repeat("y", 1000)
	a.GroupValues = make([]string, 64) // 4 MB rendered
	_, err := n.Notify(context.Background(), a)
	if retry, _ := alert.RetryPolicy(err); err == nil || retry || !strings.Contains(err.Error(), "over 262144 bytes") {
		t.Errorf("Notify: %v; want a permanent error naming the bound", err)
	}
	if errors.Is(err, context.Canceled) || len(s.requests()) != 0 {
		t.Error("something was sent")
	}
}

// inUTC is st as the body shows it: its times in UTC.
func inUTC(st alert.State) alert.State {
	for _, t := range []*time.Time{&st.OpenedAt, &st.AckedAt, &st.ResolvedAt, &st.LabelledAt} {
		if !t.IsZero() {
			*t = t.UTC()
		}
	}
	return st
}
