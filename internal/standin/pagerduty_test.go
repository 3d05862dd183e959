package standin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/internal/standin"
)

const routingKey = "R0UT1NGKEYR0UT1NGKEYR0UT1NGKEY12"

// send posts an event to path and answers the status.
func send(t *testing.T, s *standin.PagerDuty, path string, ev map[string]any) int {
	t.Helper()
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	code, _ := do(t, req)
	return code
}

func event(action, dedup string) map[string]any {
	ev := map[string]any{"routing_key": routingKey, "event_action": action, "dedup_key": dedup}
	if action == "trigger" {
		ev["payload"] = map[string]any{"summary": "s", "source": "fraudwatch", "severity": "critical"}
	}
	return ev
}

// An incident opens on a trigger, is acknowledged and resolved, and opens
// again on a trigger once resolved; an event out of turn leaves it alone.
func TestPagerDutyIncidentLifecycle(t *testing.T) {
	rec := &recorder{TB: t}
	s := standin.NewPagerDuty(rec)
	if got := s.Incident("k"); got != "" {
		t.Errorf("before any event: %q", got)
	}
	for i, step := range []struct{ action, want string }{
		{"acknowledge", ""},
		{"trigger", "triggered"},
		{"acknowledge", "acknowledged"},
		{"trigger", "acknowledged"},
		{"resolve", "resolved"},
		{"acknowledge", "resolved"},
		{"trigger", "triggered"},
	} {
		if code := send(t, s, "/v2/enqueue", event(step.action, "k")); code != http.StatusAccepted {
			t.Fatalf("step %d (%s): %d", i, step.action, code)
		}
		if got := s.Incident("k"); got != step.want {
			t.Errorf("step %d (%s): incident %q, want %q", i, step.action, got, step.want)
		}
	}
	if got := len(s.Events()); got != 7 {
		t.Errorf("%d events kept, want 7", got)
	}
	if got := s.Incident("other"); got != "" {
		t.Errorf("another key's incident %q", got)
	}
	rec.expectNoFailure(t)
}

// An invalid event is answered 400 with its reasons and fails the test; a
// path other than the Events API's fails it too; ForceNext answers once.
func TestPagerDutyViolations(t *testing.T) {
	rec := &recorder{TB: t}
	s := standin.NewPagerDuty(rec)
	bad := event("trigger", "k")
	delete(bad["payload"].(map[string]any), "source")
	if code := send(t, s, "/v2/enqueue", bad); code != http.StatusBadRequest {
		t.Errorf("an event without a source: %d", code)
	}
	rec.expectFailure(t, "'payload.source' is missing")
	if code := send(t, s, "/v2/enqueue", event("resolve", "")); code != http.StatusBadRequest {
		t.Errorf("a resolve without a dedup_key: %d", code)
	}
	rec.expectFailure(t, "'dedup_key' is required for resolve")
	if code := send(t, s, "/enqueue", event("trigger", "k")); code != http.StatusNotFound {
		t.Errorf("another path: %d", code)
	}
	rec.expectFailure(t, "not the Events API v2")
	s.ForceNext(standin.Forced{Code: http.StatusTooManyRequests})
	if code := send(t, s, "/x/v2/enqueue", event("trigger", "k")); code != http.StatusTooManyRequests {
		t.Errorf("forced: %d", code)
	}
	if code := send(t, s, "/x/v2/enqueue", event("trigger", "k")); code != http.StatusAccepted {
		t.Errorf("after the forced answer: %d", code)
	}
	if len(s.Events()) != 1 || s.Incident("k") != "triggered" {
		t.Errorf("events %v, incident %q: want only the last, triggered", s.Events(), s.Incident("k"))
	}
	rec.expectNoFailure(t)
}
