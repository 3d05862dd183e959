package backtest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/model"
)

// replayScripts are the scripts as a replay's engine calls them: without
// the alerts' seals, since a replay's alerts go to no dispatcher, so
// nothing would read them. (Written, a batch's seals are one pipeline of
// two commands an alert, which miniredis's in-memory pipe, unbuffered,
// could not take: the server blocked answering the first while the client
// still wrote the rest.) A scored replay's evidence is kept by evidence;
// a plain one keeps none (shareSets).
type replayScripts struct {
	*lua.Scripts
	evidence *evidence
}

func (replayScripts) Seal(context.Context, string, []lua.Seal) error { return nil }

func (s replayScripts) AddEvidence(ctx context.Context, calls []*lua.Evidence) error {
	if s.evidence == nil {
		return s.Scripts.AddEvidence(ctx, calls)
	}
	return s.evidence.AddEvidence(ctx, calls)
}

// Engine is what does the scripts' work in a replay.
type Engine int

const (
	// Model runs what the scripts do in Go (package lua/model, held to
	// the scripts by its tests), over ten times faster.
	Model Engine = iota
	// Lua runs the scripts themselves, in miniredis's Lua interpreter.
	Lua
)

// String is how a report names the engine.
func (e Engine) String() string {
	if e == Lua {
		return "lua"
	}
	return "go model"
}

// replayServer is a replay's Redis: a client for the scripts' calls that never
// leaves the process, and its clock.
type replayServer struct {
	rdb     *redis.Client
	advance func(now time.Time) // moves the clock to now: keys due expire
	close   func()
	expiry  *expiry // Lua's clock; nil for the model's
}

func newServer(engine Engine, now time.Time) (*replayServer, error) {
	if engine == Model {
		if err := model.Follows(); err != nil {
			return nil, fmt.Errorf("backtest: %w", err)
		}
		st := model.New(now)
		rdb := st.Client()
		return &replayServer{rdb: rdb, advance: st.SetTime, close: func() { rdb.Close() }}, nil
	}
	// No listener: the client's connections are pipes in memory, so a
	// replay opens no port and never touches the network.
	mr := miniredis.NewMiniRedis()
	clk, err := newExpiry(mr, now)
	if err != nil {
		mr.Close()
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) { return mr.Dial() }})
	return &replayServer{rdb: rdb, advance: clk.advance, close: func() { rdb.Close(); mr.Close() }, expiry: clk}, nil
}

// claim decides an alert as the dispatcher does: shadow rules never
// notify, and an alert whose (rule, group) holds a cooldown is suppressed.
// Its record is the replay's own receiver's ("backtest"), claimed by the
// alert's one delivery.
func claim(ctx context.Context, s *lua.Scripts, keys lua.Keys, a alert.Alert) (string, error) {
	if a.Shadow() {
		return dispatch.SuppressedShadow, nil
	}
	g, err := keys.ParseGroup(a.Group)
	if err != nil {
		return "", fmt.Errorf("backtest: claim alert: %w", err)
	}
	c := lua.AlertClaim{CooldownKey: a.CooldownKey, RecordKey: keys.Record(g, a.Rule, a.EventID, "backtest"),
		LegacyKey: a.RecordKey, AlertKey: keys.Alert(g, a.Rule, a.EventID), ID: a.ID, Claimant: "backtest", Cooldown: a.Cooldown}
	claimed, err := s.ClaimAlert(ctx, c)
	if err != nil {
		return "", fmt.Errorf("backtest: claim alert: %w", err)
	}
	if claimed != lua.ClaimSend {
		return dispatch.SuppressedCooldown, nil
	}
	err = s.SettleAlerts(ctx, lua.SettleSent, lua.Settlement{CooldownKey: c.CooldownKey, RecordKey: c.RecordKey, AlertKey: c.AlertKey,
		ID: c.ID, Claimant: c.Claimant})
	if err != nil {
		return "", fmt.Errorf("backtest: settle alert: %w", err)
	}
	return "sent", nil
}

func groupText(a alert.Alert) string {
	parts := make([]string, len(a.GroupBy))
	for i, f := range a.GroupBy {
		v := ""
		if i < len(a.GroupValues) {
			v = a.GroupValues[i]
		}
		parts[i] = f + "=" + v
	}
	return strings.Join(parts, ",")
}
