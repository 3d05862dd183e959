package demo

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/webhook"
)

// checkRoutedAckedThreaded checks a run of the built-in rules: the rule
// routed to the case system reached its webhook endpoint, every alert of
// it and nothing else; the first was acknowledged, shown on the console
// and sent to the webhook; a repeat crossing was shown in the thread of an
// alert printed before it; and the summary counts each.
func checkRoutedAckedThreaded(t *testing.T, out, summary string) {
	t.Helper()
	const routed = "amount-per-card-10m"
	created := regexp.MustCompile(`(?m)^  → webhook cases: alert\.created (\S+) (\S+)$`).FindAllStringSubmatch(out, -1)
	if len(created) == 0 {
		t.Fatal("no alert reached the webhook endpoint")
	}
	for _, m := range created {
		if m[1] != routed || !strings.HasPrefix(m[2], routed+"/ev-") {
			t.Errorf("the webhook received %s %s; the routes send it only %s", m[1], m[2], routed)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  ALERT\s+\S+\s+`+routed+`:`).FindAllString(out, -1)); n != len(created) {
		t.Errorf("the console printed %d alerts of %s, the webhook received %d", n, routed, len(created))
	}
	first := created[0][2]
	acked := regexp.MustCompile(`(?m)^  ✔ acknowledged by demo: `+routed+` (\S+)$`).FindAllStringSubmatch(out, -1)
	if len(acked) != 1 || acked[0][1] != first {
		t.Errorf("the console showed acknowledgements %v, want one of %s, the webhook's first alert", acked, first)
	}
	if !strings.Contains(out, "  → webhook cases: alert.acknowledged "+routed+" "+first+" by demo\n") {
		t.Errorf("the webhook did not receive the acknowledgement of %s", first)
	}
	again := regexp.MustCompile(`(?m)^  ↳ again: KRW [\d,]+ · order ord-\d+ \(in the thread of (\S+)\)$`).FindStringSubmatchIndex(out)
	if again == nil {
		t.Fatal("no repeat crossing was shown in a thread")
	}
	parent := out[again[2]:again[3]]
	if at := strings.Index(out, "  → webhook cases: alert.created "+routed+" "+parent+"\n"); at < 0 || at > again[0] {
		t.Errorf("the thread reply names %s, which is not an alert delivered before it", parent)
	}
	for _, re := range []string{`webhook cases\s+(\d+) alerts? \(alert\.created\) and 1 acknowledgement \(alert\.acknowledged\), each signature verified\n`,
		`acknowledged\s+(\d+) by demo`, `thread replies\s+(\d+) of \d+ repeats?`} {
		if n := number(t, summary, re); n < 1 || (re[0] == 'w' && n != len(created)) {
			t.Errorf("summary: %q counts %d", re, n)
		}
	}
}

// The case system takes what alert/webhook sends, signed with its secret,
// and refuses a request whose signature does not verify.
func TestCaseSystemVerifiesSignatures(t *testing.T) {
	var buf bytes.Buffer
	cs, err := startCaseSystem(casesName, &output{w: &buf})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.close()
	n, err := webhook.New(webhook.Config{Name: casesName, URL: cs.url, Secrets: []string{cs.secret}})
	if err != nil {
		t.Fatal(err)
	}
	a := sampleAlert()
	a.ID = a.Rule + "/" + a.EventID
	if _, err := n.Notify(t.Context(), a); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	st := alert.State{Status: alert.StatusAcknowledged, AckedBy: "demo", AckedAt: time.Now()}
	if err := n.Update(t.Context(), a, st, alert.Receipt{}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if got := <-cs.created; got != a.ID {
		t.Errorf("handed %q to acknowledge, want %q", got, a.ID)
	}

	forged, err := webhook.New(webhook.Config{Name: casesName, URL: cs.url, Secrets: []string{"whsec_" + strings.Repeat("A", 32)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := forged.Notify(t.Context(), a); err == nil {
		t.Error("a message signed with another secret was taken")
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, cs.url, strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unsigned request: %s, want 401", resp.Status)
	}
	if c, k, r := cs.received("alert.created"), cs.received("alert.acknowledged"), cs.received("rejected"); c != 1 || k != 1 || r != 2 {
		t.Errorf("counted %d created, %d acknowledged, %d rejected; want 1, 1, 2", c, k, r)
	}
	want := "  → webhook cases: alert.created amount-per-card-10m amount-per-card-10m/ev-000042\n" +
		"  → webhook cases: alert.acknowledged amount-per-card-10m amount-per-card-10m/ev-000042 by demo\n"
	if !strings.HasPrefix(buf.String(), want) {
		t.Errorf("printed\n%s\nwant it to start with\n%s", buf.String(), want)
	}
}
