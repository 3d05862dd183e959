package alert

import (
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// The dispatcher's defaults are the figures README's Alerts and Floods
// sections give.
func TestDispatcherDefaults(t *testing.T) {
	var c DispatcherConfig
	c.setDefaults()
	want := DispatcherConfig{
		MaxAttempts:    5,
		MinBackoff:     500 * time.Millisecond,
		MaxBackoff:     30 * time.Second,
		MaxRetryAfter:  5 * time.Minute,
		AttemptTimeout: 15 * time.Second,
		KeyPrefix:      "fw",
		ParkedRetry:    30 * time.Second,
		ChannelBudget:  lua.Budget{Rate: 1, Burst: 3},
		OverallBudget:  lua.Budget{Rate: 5, Burst: 15},
		DigestSize:     10,
	}
	if c != want {
		t.Errorf("defaults\n%+v,\nwant\n%+v", c, want)
	}
}
