package demo

import (
	"context"
	"testing"
	"time"
)

// The demo reloads its rules halfway through a run with --duration, and
// after a minute of one without (README, Two commands).
func TestReloadComesHalfwayOrAfterAMinute(t *testing.T) {
	var rr rulesReload
	if got := rr.when(context.Background()); got != time.Minute {
		t.Errorf("without a deadline: after %v, want 1m", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got := rr.when(ctx); got > 15*time.Second || got < 14*time.Second {
		t.Errorf("with 30s to go: after %v, want about 15s", got)
	}
}
