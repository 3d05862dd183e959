package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/alert/slack"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/rules"
)

// interactions serves the clicks on alerts' buttons (slack.Interactions)
// on a listener of its own, slack.interactions_listen: what Slack must
// reach is apart from metrics and health.
type interactions struct {
	listener net.Listener
	server   *http.Server
	// sweeper says the end of a silence snoozed from a message in its
	// thread; nil without a Slack bot to say it.
	sweeper *silence.Sweeper
}

// buildInteractions opens the interactions listener when buttons are
// configured.
func (a *App) buildInteractions() error {
	s := a.cfg.Slack
	if s.InteractionsListen == "" {
		return nil
	}
	keys, err := lua.NewKeys(a.cfg.Redis.KeyPrefix)
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	store := silence.NewStore(a.rdb, a.lua, keys)
	h, err := slack.NewInteractions(s.SigningSecret.Value(), clicks{store: store, records: a.lua, keys: keys, rules: a.rules.inForce},
		slack.NewRedisReplays(a.rdb, a.cfg.Redis.KeyPrefix), nil, a.log.With("component", "slack"), slack.WithLife(a.outcomes))
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /slack/interactions", h)
	l, err := net.Listen("tcp", s.InteractionsListen)
	if err != nil {
		return fmt.Errorf("app: listen on slack.interactions_listen %s: %w", s.InteractionsListen, err)
	}
	a.ia = &interactions{listener: l, server: newHTTPServer(mux)}
	if bot := a.slackBot(); bot != nil {
		if a.ia.sweeper, err = silence.NewSweeper(silence.SweeperConfig{}, store, bot, a.log.With("component", "silence"), a.reg); err != nil {
			return fmt.Errorf("app: %w", err)
		}
	}
	return nil
}

// slackBot is the first Slack receiver that posts with a bot token (it
// can reply in a thread), nil without one.
func (a *App) slackBot() *slack.Bot {
	for _, d := range a.deliveries {
		if b, ok := d.notifier.(*slack.Bot); ok {
			return b
		}
	}
	return nil
}

// InteractionsAddr is the interactions listener's address, "" without one.
func (a *App) InteractionsAddr() string {
	if a.ia == nil {
		return ""
	}
	return a.ia.listener.Addr().String()
}

// serve runs until stop; a failure stops the App as metrics' would.
func (ia *interactions) serve(fail func(error)) {
	if err := ia.server.Serve(ia.listener); !errors.Is(err, http.ErrServerClosed) {
		fail(fmt.Errorf("app: slack interactions server: %w", err))
	}
}

// stop ends the server within d: before Redis closes, which its clicks use.
func (ia *interactions) stop(ctx context.Context, d time.Duration) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	if err := ia.server.Shutdown(sctx); err != nil {
		return fmt.Errorf("app: stop slack interactions server: %w", err)
	}
	return nil
}

// clicks does what an alert's buttons ask, for the rules in force: a
// Snooze silences the alert's group, an Acknowledge goes into the alert's
// record for Slack.
type clicks struct {
	store   *silence.Store
	records acker
	keys    lua.Keys
	rules   func() []rules.Rule
}

// acker writes acknowledgements into alerts' records (lua.Scripts).
type acker interface {
	AcknowledgeAlert(ctx context.Context, recordKey, who string) (lua.Ack, error)
}

func (c clicks) Snooze(ctx context.Context, rule, group string, match map[string]string, d time.Duration, who string) (slack.Recorded, error) {
	return c.SnoozeMessage(ctx, rule, group, match, d, who, alert.Receipt{})
}

// SnoozeMessage is Snooze from the message msg, in whose thread the
// silence's end is said (silence.Sweeper).
func (c clicks) SnoozeMessage(ctx context.Context, rule, group string, match map[string]string, d time.Duration, who string,
	msg alert.Receipt) (slack.Recorded, error) {
	rs := SilenceRules(c.rules())
	sil, err := c.store.Add(ctx, rs, silence.Spec{Rule: rule, Group: group, Match: match, For: d,
		Reason: "snoozed from Slack", Author: who, Thread: msg}, time.Now())
	if err != nil {
		return slack.Recorded{}, err
	}
	return slack.Recorded{SilenceID: sil.ID, Ends: sil.Ends, GroupBy: rs[rule], GroupRef: sil.GroupRef}, nil
}

// Acknowledge records who acknowledged the alert of rule, group (its
// encoding) and event id in its record for Slack, where the alert was
// posted; the rule need not be in force any more: the alert was. The first
// acknowledgement stays.
func (c clicks) Acknowledge(ctx context.Context, rule, group, eventID, who string) (slack.Recorded, error) {
	g, err := c.keys.ParseGroup(group)
	if err != nil || rule == "" || strings.ContainsAny(rule, ":{} .") || eventID == "" {
		// Not quoted: a group spells its values.
		return slack.Recorded{}, errors.New("the button names no alert")
	}
	ack, err := c.records.AcknowledgeAlert(ctx, c.keys.Record(g, rule, eventID, slack.ReceiverName), who)
	if errors.Is(err, lua.ErrNoRecord) {
		return slack.Recorded{}, fmt.Errorf("fraudwatch keeps no record of this alert (records last %d days): nothing recorded",
			lua.DefaultRetention/(24*time.Hour))
	}
	if err != nil {
		return slack.Recorded{}, err
	}
	ref, err := c.store.GroupRef(ctx, g.Encoding())
	if err != nil {
		return slack.Recorded{}, err
	}
	return slack.Recorded{AckedBy: ack.By, AckedAt: ack.At, Before: ack.Before, GroupBy: SilenceRules(c.rules())[rule], GroupRef: ref}, nil
}

// SilenceRules are rules as package silence takes them.
func SilenceRules(rs []rules.Rule) silence.Rules {
	groups := make(silence.Rules, len(rs))
	for _, r := range rs {
		groups[r.Name] = r.GroupBy
	}
	return groups
}
