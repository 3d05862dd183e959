package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
)

// heldWaits is the scripts, but the first alert kept waiting is held until
// release: a slow Redis, as a loaded machine makes it, for one key.
type heldWaits struct {
	*lua.Scripts
	once             sync.Once
	entered, release chan struct{}
}

func (h *heldWaits) Wait(ctx context.Context, k lua.WaitingKeys, rule, id string, whole, compact []byte, channel string,
	limit int, lifetime time.Duration) (lua.Wait, error) {
	h.once.Do(func() { close(h.entered) })
	select {
	case <-h.release:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return h.Scripts.Wait(ctx, k, rule, id, whole, compact, channel, limit, lifetime)
}

// alertOf is an alert of rule to channel, of group, crossed by eventID,
// with the keys the engine makes for them.
func (e *testEnv) alertOf(rule, channel, group, eventID string) alert.Alert {
	a := e.alert(group, eventID)
	a.Rule, a.ID, a.Channel = rule, rule+"/"+eventID, channel
	g := e.keys.Group(a.GroupValues)
	a.CooldownKey, a.RecordKey = e.keys.Cooldown(g, rule), e.keys.AlertRecord(g, rule, eventID)
	a.SilenceKey, a.RuleSilence = e.keys.Silences(g, rule), e.keys.RuleSilences(g, rule)
	return a
}

// keyed is a's message at offset, keyed as Topic keys it.
func (e *testEnv) keyed(t *testing.T, a alert.Alert, offset int64) kafka.Message {
	msg := e.message(t, a, offset)
	msg.Key = []byte(a.CooldownKey)
	return msg
}

// inLane is an alert of rule to channel whose message goes to lane of
// lanes when want, or to any other lane when not.
func (e *testEnv) inLane(rule, channel, eventID string, lanes, lane int, want bool) alert.Alert {
	for i := 0; ; i++ {
		a := e.alertOf(rule, channel, fmt.Sprintf("%s-%d", eventID, i), eventID)
		if (dispatch.LaneOf([]byte(a.CooldownKey), lanes) == lane) == want {
			return a
		}
	}
}

// A partition's messages of different keys are settled side by side: an
// alert of #risk behind a #fraud alert that Redis is slow to keep waiting
// is posted meanwhile (docs/alerts.md, Floods). With one lane it waits its
// turn.
func TestLanesKeepOtherKeysMoving(t *testing.T) {
	for _, tc := range []struct {
		lanes           int
		postedMeanwhile bool
	}{{8, true}, {1, false}} {
		t.Run(fmt.Sprintf("%d lanes", tc.lanes), func(t *testing.T) {
			slack := newChannelSlack("#fraud")
			cfg := dispatch.DispatcherConfig{Lanes: tc.lanes, ChannelBudget: lua.Budget{Rate: 1.0 / 3600, Burst: 1},
				OverallBudget: lua.Budget{Rate: 100, Burst: 100}}
			e := testDispatcher(t, slack, cfg)
			held := &heldWaits{Scripts: e.scripts, entered: make(chan struct{}), release: make(chan struct{})}
			cfg.KeyPrefix, cfg.MinBackoff, cfg.MaxBackoff, cfg.MaxAttempts = e.pfx, 5*time.Millisecond, 20*time.Millisecond, 4
			d, err := dispatch.NewDispatcher(cfg, slack, held, nil, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			// f0 takes #fraud's one message, f1 is then held: both in lane 0.
			f0 := e.inLane("r", "#fraud", "e-f0", tc.lanes, 0, true)
			f1 := e.inLane("r", "#fraud", "e-f1", tc.lanes, 0, true)
			risk := e.inLane("risk", "#risk", "e-risk", tc.lanes, 0, tc.lanes == 1)
			d.SetRules(map[string]dispatch.RuleSettings{"r": settingsOf(f0), "risk": settingsOf(risk)})
			msgs := []kafka.Message{e.keyed(t, f0, 0), e.keyed(t, f1, 1), e.keyed(t, risk, 2)}
			type result struct {
				done int
				err  error
			}
			handled := make(chan result, 1)
			go func() {
				n, err := d.HandleMessages(t.Context(), msgs)
				handled <- result{n, err}
			}()
			<-held.entered // one #fraud alert is past the budget, held
			riskPosted := func() bool {
				return slices.ContainsFunc(slack.snapshot(), func(p channelPost) bool { return p.channel == "#risk" })
			}
			if tc.postedMeanwhile {
				testkit.WaitFor(t, 10*time.Second, "the #risk alert posted while a #fraud alert is held", riskPosted)
			}
			released := time.Now()
			close(held.release)
			r := <-handled
			if r.done != len(msgs) || r.err != nil {
				t.Fatalf("HandleMessages = %d, %v; want %d, nil", r.done, r.err, len(msgs))
			}
			var at time.Time
			for _, p := range slack.snapshot() {
				if p.channel == "#risk" {
					at = p.at
				}
			}
			if at.IsZero() || at.Before(released) != tc.postedMeanwhile {
				t.Errorf("the #risk alert posted at %v, the held alert released at %v: want it posted meanwhile: %v",
					at, released, tc.postedMeanwhile)
			}
		})
	}
}

// failing is a notifier whose posts of the alerts in down fail (Slack
// down), until it is up.
type failing struct {
	*channelSlack
	mu   sync.Mutex
	down map[string]bool
}

func (f *failing) Notify(ctx context.Context, a alert.Alert) (alert.Receipt, error) {
	f.mu.Lock()
	down := f.down[a.ID]
	f.mu.Unlock()
	if down {
		return alert.Receipt{}, errors.New("slack: 503")
	}
	return f.channelSlack.Notify(ctx, a)
}

func (f *failing) up() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = nil
}

// A batch whose message fails is committed no further than it, however far
// the other lanes went; delivered again, the messages after it that were
// settled already are not posted twice.
func TestALaneThatFailsCommitsWhatCameBefore(t *testing.T) {
	n := &failing{channelSlack: newChannelSlack("#fraud"), down: map[string]bool{}}
	e := testDispatcher(t, n, dispatch.DispatcherConfig{Lanes: 8})
	var alerts []alert.Alert
	for i, lane := range []int{0, 1, 0, 1, 2} {
		alerts = append(alerts, e.inLane("r", "#fraud", fmt.Sprintf("e-%d", i), 8, lane, true))
	}
	e.d.SetRules(map[string]dispatch.RuleSettings{"r": settingsOf(alerts[0])})
	n.down[alerts[1].ID] = true
	var msgs []kafka.Message
	for i, a := range alerts {
		msgs = append(msgs, e.keyed(t, a, int64(i)))
	}
	// The lane of message 0 may have stopped before it, once message 1
	// failed: never past message 1.
	done, err := e.d.HandleMessages(t.Context(), msgs)
	if done > 1 || !errors.Is(err, dispatch.ErrNotDelivered) {
		t.Fatalf("HandleMessages = %d, %v; want at most 1 and ErrNotDelivered", done, err)
	}
	n.up()
	if again, err := e.d.HandleMessages(t.Context(), msgs[done:]); again != len(msgs)-done || err != nil {
		t.Fatalf("delivered again: HandleMessages = %d, %v; want %d, nil", again, err, len(msgs)-done)
	}
	posted := map[string]int{}
	for _, p := range n.snapshot() {
		for _, id := range p.ids {
			posted[id]++
		}
	}
	for _, a := range alerts {
		if posted[a.ID] != 1 {
			t.Errorf("%s posted %d times, want once: %v", a.ID, posted[a.ID], posted)
		}
	}
}
