package pagerduty_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// standIn speaks the Events API v2 as PagerDuty documents it
// (developer.pagerduty.com, Events API v2: Send an Alert Event, and the
// Overview's response codes): it checks each event's fields, answers 202
// with the dedup_key, 400 "invalid event" with its reasons, and keeps
// each alert's life by dedup_key. force answers the next requests
// instead (a 429, a 500).
type standIn struct {
	*httptest.Server
	mu        sync.Mutex
	events    []map[string]any
	incidents map[string]string // dedup_key: triggered, acknowledged, resolved
	force     []forced
}

type forced struct {
	code   int
	header map[string]string
	body   string
}

func newStandIn(t *testing.T) *standIn {
	t.Helper()
	s := &standIn{incidents: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *standIn) serve(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.force) > 0 {
		f := s.force[0]
		s.force = s.force[1:]
		for k, v := range f.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(f.code)
		_, _ = io.WriteString(w, f.body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	var ev map[string]any
	errs := []string{}
	switch {
	case r.Method != http.MethodPost:
		errs = append(errs, "method must be POST")
	case len(data) > 512<<10:
		errs = append(errs, "event is over 512 KB")
	case json.Unmarshal(data, &ev) != nil:
		errs = append(errs, "Event object is not valid JSON")
	default:
		errs = check(ev)
	}
	if len(errs) > 0 {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "invalid event", "message": "Event object is invalid", "errors": errs})
		return
	}
	s.events = append(s.events, ev)
	key, _ := ev["dedup_key"].(string)
	switch state := s.incidents[key]; ev["event_action"] {
	case "trigger":
		if state == "" || state == "resolved" {
			s.incidents[key] = "triggered"
		}
	case "acknowledge":
		if state == "triggered" {
			s.incidents[key] = "acknowledged"
		}
	case "resolve":
		if state == "triggered" || state == "acknowledged" {
			s.incidents[key] = "resolved"
		}
	}
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "message": "Event processed", "dedup_key": key})
}

// check is the documented validation of one event.
func check(ev map[string]any) []string {
	var errs []string
	str := func(m map[string]any, k string) (string, bool) { v, ok := m[k].(string); return v, ok }
	if key, _ := str(ev, "routing_key"); utf8.RuneCountInString(key) != 32 {
		errs = append(errs, "Length of 'routing_key' is incorrect (should be 32 characters)")
	}
	action, _ := str(ev, "event_action")
	if !slices.Contains([]string{"trigger", "acknowledge", "resolve"}, action) {
		errs = append(errs, "'event_action' is invalid (must be one of: trigger acknowledge resolve)")
	}
	key, hasKey := str(ev, "dedup_key")
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
	if s, _ := str(p, "summary"); s == "" || utf8.RuneCountInString(s) > 1024 {
		errs = append(errs, fmt.Sprintf("'payload.summary' must be 1 to 1024 characters (is %d)", utf8.RuneCountInString(s)))
	}
	if s, _ := str(p, "source"); s == "" {
		errs = append(errs, "'payload.source' is missing")
	}
	if s, _ := str(p, "severity"); !slices.Contains([]string{"critical", "error", "warning", "info"}, s) {
		errs = append(errs, "'payload.severity' is invalid (must be one of: critical error warning info)")
	}
	if ts, ok := p["timestamp"]; ok {
		if s, _ := ts.(string); s == "" || !parsesISO8601(s) {
			errs = append(errs, "'payload.timestamp' is not an ISO 8601 timestamp")
		}
	}
	if cd, ok := p["custom_details"]; ok {
		if _, isObj := cd.(map[string]any); !isObj {
			errs = append(errs, "'payload.custom_details' must be an object")
		}
	}
	if links, ok := ev["links"]; ok {
		ls, _ := links.([]any)
		for i, l := range ls {
			if m, _ := l.(map[string]any); m == nil || m["href"] == nil || m["href"] == "" {
				errs = append(errs, fmt.Sprintf("'links[%d].href' is required", i))
			}
		}
	}
	return errs
}

func parsesISO8601(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

func (s *standIn) received() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

func (s *standIn) incident(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.incidents[key]
}

func (s *standIn) forceNext(f ...forced) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.force = append(s.force, f...)
}
