package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/webhook"
)

// verifier is the specification's published Go verifier for secret.
func verifier(t *testing.T, secret string) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("standardwebhooks.NewWebhook: %v", err)
	}
	return wh
}

// The stand-in answers 401 unless the Standard Webhooks library verifies
// the message, timestamp tolerance included; the body is the documented
// version 1.
func TestSignatureVerifiesWithTheStandardWebhooksLibrary(t *testing.T) {
	secret := newSecret(t)
	wh := verifier(t, secret)
	s := newStandIn(t)
	s.check = func(r request) int {
		if err := wh.Verify(r.body, r.header); err != nil {
			t.Errorf("verify: %v", err)
			return http.StatusUnauthorized
		}
		return http.StatusNoContent
	}
	n := newNotifier(t, webhook.Config{URL: s.URL + "/hooks/fraud", Secrets: []string{secret}})
	before := time.Now().Unix()
	if _, err := n.Notify(context.Background(), sample()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	r := s.last(t)
	ts, err := strconv.ParseInt(r.header.Get("webhook-timestamp"), 10, 64)
	if err != nil || ts < before || ts > time.Now().Unix() {
		t.Errorf("webhook-timestamp %q, want the unix seconds of the attempt", r.header.Get("webhook-timestamp"))
	}
	if id := r.header.Get("webhook-id"); !strings.HasPrefix(id, "msg_") || strings.Contains(id, ".") {
		t.Errorf("webhook-id %q, want msg_ and no '.'", id)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, r.body)
	}
	a := m["alert"].(map[string]any)
	for k, want := range map[string]any{"version": "1", "type": "alert.created", "timestamp": "2025-03-04T05:05:06.03Z"} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	for k, want := range map[string]any{"id": "amount-per-card-10m/evt-991", "rule": "amount-per-card-10m",
		"severity": "critical", "metric": "amount", "current": 1_250_000.0, "current_text": "KRW 1,250,000",
		"window_seconds": 600.0, "window_type": "fixed", "order_id": "ord-77", "at": "2025-03-04T05:05:06Z"} {
		if a[k] != want {
			t.Errorf("alert.%s = %v, want %v", k, a[k], want)
		}
	}
	if ev := a["evidence"].([]any); len(ev) != 1 {
		t.Errorf("evidence %v", ev)
	}
	if l := a["links"].([]any); len(l) != 1 || l[0].(map[string]any)["href"] != "https://backoffice.example/orders/ord-77" {
		t.Errorf("links %v", l)
	}
	if st := m["state"].(map[string]any); st["status"] != "open" {
		t.Errorf("state %v", st)
	}
	for _, internal := range []string{"cooldown_key", "record_key", "silence_key", "definition"} {
		if strings.Contains(string(r.body), internal) {
			t.Errorf("the body shows fraudwatch's %s", internal)
		}
	}
}

// While a secret rotates each signs: a receiver holding either verifies;
// one holding neither does not.
func TestRotatingSecretsSignWithEach(t *testing.T) {
	oldSecret, newSecretV := newSecret(t), newSecret(t)
	s := newStandIn(t)
	n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{newSecretV, oldSecret}})
	if _, err := n.Notify(context.Background(), sample()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	r := s.last(t)
	sigs := strings.Fields(r.header.Get("webhook-signature"))
	if len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1,") {
		t.Fatalf("webhook-signature %q, want two v1 signatures", r.header.Get("webhook-signature"))
	}
	for _, secret := range []string{oldSecret, newSecretV} {
		if err := verifier(t, secret).Verify(r.body, r.header); err != nil {
			t.Errorf("a receiver holding one of the secrets: %v", err)
		}
	}
	if err := verifier(t, newSecret(t)).Verify(r.body, r.header); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("a receiver holding another secret: %v, want no matching signature", err)
	}
}

// A message changed on the way (its body, id or timestamp) fails the
// verifier.
func TestATamperedMessageIsRejected(t *testing.T) {
	secret := newSecret(t)
	s := newStandIn(t)
	n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{secret}})
	if _, err := n.Notify(context.Background(), sample()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	r := s.last(t)
	wh := verifier(t, secret)
	if err := wh.Verify(r.body, r.header); err != nil {
		t.Fatalf("the message as sent: %v", err)
	}
	body := []byte(strings.Replace(string(r.body), `"current":1250000`, `"current":1250001`, 1))
	if string(body) == string(r.body) {
		t.Fatal("the test did not change the body")
	}
	if err := wh.Verify(body, r.header); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("a changed body: %v, want no matching signature", err)
	}
	for _, h := range []string{"webhook-id", "webhook-timestamp"} {
		hd := r.header.Clone()
		v := hd.Get(h)
		if h == "webhook-id" {
			hd.Set(h, v+"x")
		} else {
			ts, _ := strconv.ParseInt(v, 10, 64)
			hd.Set(h, strconv.FormatInt(ts-1, 10))
		}
		if err := wh.Verify(r.body, hd); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			t.Errorf("a changed %s: %v, want no matching signature", h, err)
		}
	}
}

// Every attempt at one message, and the message sent again after a
// crash, carries one webhook-id, so that a receiver drops repeats; each
// change of the alert's state is a message of its own.
func TestEveryAttemptAtOneMessageHasOneID(t *testing.T) {
	secret := newSecret(t)
	s := newStandIn(t, answer{code: 500}, answer{code: 429}, answer{code: 200})
	n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{secret}})
	ctx := context.Background()
	a := sample()
	for range 3 { // as the dispatcher's attempts call it
		_, _ = n.Notify(ctx, a)
	}
	acked := alert.State{Status: alert.StatusAcknowledged, AckedBy: "slack:U1", AckedAt: a.At.Add(time.Minute)}
	resolved := acked
	resolved.Status, resolved.ResolvedBy, resolved.ResolvedAt = alert.StatusResolved, "cli:alice", a.At.Add(time.Hour)
	elsewhere := acked // the same state, read in another zone
	elsewhere.AckedAt = acked.AckedAt.In(time.FixedZone("UTC-5", -5*3600))
	for _, st := range []alert.State{acked, elsewhere, resolved} {
		if err := n.Update(ctx, a, st, alert.Receipt{}); err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	other := a
	other.ID, other.EventID = a.Rule+"/evt-992", "evt-992"
	if _, err := n.Notify(ctx, other); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	got := s.requests()
	if len(got) != 7 {
		t.Fatalf("%d requests, want 7", len(got))
	}
	id := func(i int) string { return got[i].header.Get("webhook-id") }
	if id(0) != id(1) || id(1) != id(2) {
		t.Errorf("attempts at one alert carry ids %s, %s, %s", id(0), id(1), id(2))
	}
	if id(3) != id(4) {
		t.Errorf("one acknowledgement sent twice (its time in another zone) carries ids %s and %s", id(3), id(4))
	}
	seen := map[string]int{}
	for _, i := range []int{0, 3, 5, 6} {
		if j, dup := seen[id(i)]; dup {
			t.Errorf("messages %d and %d (another change or alert) share id %s", j, i, id(i))
		}
		seen[id(i)] = i
	}
	for i, r := range got {
		if err := verifier(t, secret).Verify(r.body, r.header); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
}
