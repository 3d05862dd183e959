package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// profileLatency wraps trace (nil or the -latency-trace printer) so that
// the measured part's start also starts a CPU profile of the first replica
// for d, taken from its /debug/pprof/ (metrics.pprof, which -latency-profile
// turns on) and written to path: where fraudwatch's CPU goes at half (b)'s
// rate, apart from (b)'s own run, which -cpuprofile's profile is mostly of.
// wait returns once the profile is written, or why it is not.
func profileLatency(ctx context.Context, rep *replica, path string, d time.Duration, trace func(time.Duration)) (wrapped func(time.Duration), wait func() error) {
	done := make(chan error, 1)
	started := false
	wrapped = func(elapsed time.Duration) {
		if elapsed == 0 && !started {
			started = true
			go func() { done <- takeProfile(ctx, rep.metrics, path, d) }()
		}
		if trace != nil {
			trace(elapsed)
		}
	}
	wait = func() error {
		if !started {
			return fmt.Errorf("-latency-profile: the measured part never began")
		}
		return <-done
	}
	return wrapped, wait
}

// takeProfile asks the replica whose /metrics is at metrics for a CPU
// profile of d and writes it to path.
func takeProfile(ctx context.Context, metrics, path string, d time.Duration) error {
	url := strings.TrimSuffix(metrics, "/metrics") + fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(int(d.Seconds()), 1))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: d + 30*time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("-latency-profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("-latency-profile: %s answered %s (is metrics.pprof on?)", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-latency-profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("-latency-profile: write %s: %w", path, err)
	}
	return f.Close()
}
