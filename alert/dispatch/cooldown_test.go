package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
)

func TestDispatcherCooldown(t *testing.T) {
	tests := []struct {
		name           string
		cooldown       time.Duration
		wantRequests   int
		wantSuppressed float64
	}{
		{"second alert within cooldown is suppressed", 10 * time.Minute, 1, 1},
		{"cooldown 0 sends both", 0, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSlack(t, func(int) reply { return reply{} })
			env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
			first, second := env.alert("g1", "evt-first"), env.alert("g1", "evt-second")
			first.Cooldown, second.Cooldown = tt.cooldown, tt.cooldown
			for _, a := range []alert.Alert{first, second, second} { // the second one redelivered too
				if err := env.deliver(t, a); err != nil {
					t.Fatal(err)
				}
			}
			if got := f.requests(); got != tt.wantRequests {
				t.Errorf("Slack got %d requests, want %d", got, tt.wantRequests)
			}
			bodies := f.allBodies()
			if len(bodies) == 0 || !strings.Contains(bodies[0], "evt-first") {
				t.Error("the first alert was not the one sent")
			}
			if tt.wantRequests == 1 && strings.Contains(strings.Join(bodies, ""), "evt-second") {
				t.Error("the suppressed alert reached Slack")
			}
			if got := env.metric(t, "fraudwatch_alerts_sent_total", "rule", first.Rule); got != float64(tt.wantRequests) {
				t.Errorf("fraudwatch_alerts_sent_total = %v, want %d", got, tt.wantRequests)
			}
			if got := env.metric(t, "fraudwatch_alerts_suppressed_total", "rule", first.Rule, "reason", "cooldown"); got != 2*tt.wantSuppressed {
				t.Errorf("suppressed{reason=cooldown} = %v, want %v (once per delivery)", got, 2*tt.wantSuppressed)
			}
			ctx := context.Background()
			val, err := env.rdb.Get(ctx, first.CooldownKey).Result()
			switch {
			case tt.cooldown == 0:
				if !errors.Is(err, redis.Nil) {
					t.Errorf("cooldown 0 wrote the key: %q, %v", val, err)
				}
			case err != nil || val != first.ID:
				t.Errorf("cooldown key holds %q (%v), want the first alert's id", val, err)
			default:
				if ttl := env.rdb.TTL(ctx, first.CooldownKey).Val(); ttl <= 0 || ttl > tt.cooldown {
					t.Errorf("cooldown key TTL %v, want in (0, %v]", ttl, tt.cooldown)
				}
			}
		})
	}
}
