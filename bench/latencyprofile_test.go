package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The measured part's start takes the profile for the run's length from
// the replica's /debug/pprof/, once, and the trace still sees every tick;
// a replica without pprof, or a run whose measured part never began, is an
// error, not a missing file.
func TestProfileLatency(t *testing.T) {
	for _, tc := range []struct {
		name    string
		serve   bool
		ticks   []time.Duration
		wantErr string
	}{
		{"taken once", true, []time.Duration{0, time.Second, 0, 2 * time.Second}, ""},
		{"pprof off", false, []time.Duration{0}, "is metrics.pprof on?"},
		{"never began", true, nil, "never began"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := make(chan string, 4)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked <- r.URL.String()
				if !tc.serve || r.URL.Path != "/debug/pprof/profile" {
					http.NotFound(w, r)
					return
				}
				w.Write([]byte("profile"))
			}))
			defer srv.Close()
			path := filepath.Join(t.TempDir(), "latency.pprof")
			var seen []time.Duration
			wrapped, wait := profileLatency(context.Background(), &replica{metrics: srv.URL + "/metrics"}, path, 3*time.Second,
				func(d time.Duration) { seen = append(seen, d) })
			for _, d := range tc.ticks {
				wrapped(d)
			}
			err := wait()
			if len(seen) != len(tc.ticks) {
				t.Errorf("the trace saw %v, want %v", seen, tc.ticks)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("wait() = %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := <-asked; got != "/debug/pprof/profile?seconds=3" {
				t.Errorf("asked for %s", got)
			}
			if len(asked) != 0 {
				t.Errorf("asked again: %s", <-asked)
			}
			if data, err := os.ReadFile(path); err != nil || string(data) != "profile" {
				t.Errorf("the file holds %q, %v", data, err)
			}
		})
	}
}
