package standin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// PagerDuty speaks the Events API v2 as PagerDuty documents it
// (developer.pagerduty.com, Events API v2: Send an Alert Event, and the
// Overview's response codes): it checks each event's fields, answers 202
// with the dedup_key or 400 "invalid event" with its reasons (and fails
// the test with them), and keeps each incident's life by dedup_key.
// s.URL + "/v2/enqueue" is the url to configure (any path ending
// /v2/enqueue is taken; another fails the test and answers 404).
type PagerDuty struct {
	*httptest.Server
	t testing.TB

	mu        sync.Mutex
	events    []map[string]any
	incidents map[string]string // dedup_key: triggered, acknowledged, resolved
	force     []Forced
}

// Forced is an answer ForceNext makes the stand-in give instead of
// reading the event.
type Forced struct {
	Code   int
	Header map[string]string
	Body   string
}

// NewPagerDuty starts a PagerDuty.
func NewPagerDuty(t testing.TB) *PagerDuty {
	t.Helper()
	s := &PagerDuty{t: t, incidents: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *PagerDuty) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/v2/enqueue") {
		s.t.Errorf("standin.PagerDuty: %s %s: not the Events API v2 (…/v2/enqueue)", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	data, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.force) > 0 {
		f := s.force[0]
		s.force = s.force[1:]
		for k, v := range f.Header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(f.Code)
		_, _ = io.WriteString(w, f.Body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	ev, errs := readEvent(r.Method, data)
	if len(errs) > 0 {
		s.t.Errorf("standin.PagerDuty: an invalid event: %s\n%.2000s", strings.Join(errs, "; "), data)
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "invalid event", "message": "Event object is invalid", "errors": errs})
		return
	}
	s.events = append(s.events, ev)
	key, _ := ev["dedup_key"].(string)
	s.incidents[key] = nextState(s.incidents[key], ev["event_action"])
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "message": "Event processed", "dedup_key": key})
}

func readEvent(method string, data []byte) (map[string]any, []string) {
	var ev map[string]any
	switch {
	case method != http.MethodPost:
		return nil, []string{"method must be POST"}
	case len(data) > 512<<10:
		return nil, []string{"event is over 512 KB"}
	case json.Unmarshal(data, &ev) != nil:
		return nil, []string{"Event object is not valid JSON"}
	}
	return ev, check(ev)
}

// nextState is an incident's state after an event's action: a trigger
// opens one (again, once resolved), acknowledge and resolve move an open
// one on and leave the rest alone.
func nextState(state string, action any) string {
	switch action {
	case "trigger":
		if state == "" || state == "resolved" {
			return "triggered"
		}
	case "acknowledge":
		if state == "triggered" {
			return "acknowledged"
		}
	case "resolve":
		if state == "triggered" || state == "acknowledged" {
			return "resolved"
		}
	}
	return state
}

// check is the documented validation of one event.
func check(ev map[string]any) []string {
	var errs []string
	if key, _ := ev["routing_key"].(string); utf8.RuneCountInString(key) != 32 {
		errs = append(errs, "Length of 'routing_key' is incorrect (should be 32 characters)")
	}
	action, _ := ev["event_action"].(string)
	if !slices.Contains([]string{"trigger", "acknowledge", "resolve"}, action) {
		errs = append(errs, "'event_action' is invalid (must be one of: trigger acknowledge resolve)")
	}
	key, hasKey := ev["dedup_key"].(string)
	if utf8.RuneCountInString(key) > 255 {
		errs = append(errs, "'dedup_key' is too long (maximum is 255 characters)")
	}
	if action != "trigger" {
		if !hasKey || key == "" {
			errs = append(errs, "'dedup_key' is required for "+action)
		}
		return errs
	}
	p, ok := ev["payload"].(map[string]any)
	if !ok {
		return append(errs, "'payload' is missing")
	}
	return append(append(errs, checkPayload(p)...), checkLinks(ev)...)
}

func checkPayload(p map[string]any) []string {
	var errs []string
	str := func(k string) string { v, _ := p[k].(string); return v }
	if n := utf8.RuneCountInString(str("summary")); n == 0 || n > 1024 {
		errs = append(errs, fmt.Sprintf("'payload.summary' must be 1 to 1024 characters (is %d)", n))
	}
	if str("source") == "" {
		errs = append(errs, "'payload.source' is missing")
	}
	if !slices.Contains([]string{"critical", "error", "warning", "info"}, str("severity")) {
		errs = append(errs, "'payload.severity' is invalid (must be one of: critical error warning info)")
	}
	if _, ok := p["timestamp"]; ok {
		if _, err := time.Parse(time.RFC3339Nano, str("timestamp")); err != nil {
			errs = append(errs, "'payload.timestamp' is not an ISO 8601 timestamp")
		}
	}
	if cd, ok := p["custom_details"]; ok {
		if _, isObj := cd.(map[string]any); !isObj {
			errs = append(errs, "'payload.custom_details' must be an object")
		}
	}
	return errs
}

func checkLinks(ev map[string]any) []string {
	var errs []string
	links, ok := ev["links"]
	if !ok {
		return nil
	}
	ls, isList := links.([]any)
	if !isList {
		return []string{"'links' must be an array"}
	}
	for i, l := range ls {
		if m, _ := l.(map[string]any); m == nil || m["href"] == nil || m["href"] == "" {
			errs = append(errs, fmt.Sprintf("'links[%d].href' is required", i))
		}
	}
	return errs
}

// Events are the events accepted (answered 202), in order.
func (s *PagerDuty) Events() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Incident is the state of the incident of dedupKey: "" (none),
// triggered, acknowledged or resolved.
func (s *PagerDuty) Incident(dedupKey string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.incidents[dedupKey]
}

// ForceNext makes the next requests, one each, answer f instead.
func (s *PagerDuty) ForceNext(f ...Forced) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.force = append(s.force, f...)
}
