package lua

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Claim is alert_claim's decision about one alert.
type Claim int

// Claims.
const (
	// ClaimSuppressed: another alert holds the (rule, group)'s cooldown.
	ClaimSuppressed Claim = 0
	// ClaimSend: send it; the cooldown is this alert's.
	ClaimSend Claim = 1
	// ClaimSent: this alert was delivered before; do not post it again.
	ClaimSent Claim = 2
	// ClaimFailed: this alert was given up on before.
	ClaimFailed Claim = 3
	// ClaimSilenced: a silence of the rule or of the alert's group runs.
	ClaimSilenced Claim = 4
)

// ClaimAlert decides whether alert id may be sent, taking the cooldown
// (cooldown 0: none) for it when free. silences, when given, are the
// (rule, group)'s and the rule's silences keys (Keys.Silences,
// Keys.RuleSilences): a silence that runs silences the alert. Every
// redelivery of one alert gets the same decision for as long as its record
// lives (Retention).
func (s *Scripts) ClaimAlert(ctx context.Context, cooldownKey, recordKey, id string, cooldown time.Duration, silences ...string) (Claim, error) {
	keys := []string{cooldownKey, recordKey}
	if len(silences) == 2 {
		keys = append(keys, silences...)
	}
	n, err := s.single(ctx, alertClaim, AlertClaimName, keys, id, seconds(cooldown), seconds(s.cfg.Retention))
	if err != nil {
		return 0, err
	}
	if n < 0 || n > 4 {
		return 0, s.fail(AlertClaimName, fmt.Errorf("%w: %d", ErrUnexpectedReply, n))
	}
	return Claim(n), nil
}

// AddSilence adds silence id, ending at ends, to each silences key (one
// for a group's silence, every bucket's for a rule's: Keys.AllRuleSilences),
// pipelined. A key that already holds 100 silences refuses it.
func (s *Scripts) AddSilence(ctx context.Context, keys []string, id string, ends time.Time) error {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(keys))
	for i, k := range keys {
		cmds[i] = silenceAdd.EvalSha(ctx, pipe, []string{k}, id, ends.UnixMilli())
	}
	_, _ = pipe.Exec(ctx)
	for i, k := range keys {
		n, err := cmds[i].Int64()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			n, err = silenceAdd.Run(ctx, s.rdb, []string{k}, id, ends.UnixMilli()).Int64()
		}
		if err != nil {
			return s.redisError(ctx, SilenceAddName, err)
		}
		if n != 1 {
			// Not the key: it ends with the group's values, and errors
			// reach logs.
			return s.fail(SilenceAddName, ErrInvalidArguments)
		}
	}
	return nil
}

// Budget is a messages-per-second budget: rate, refilled continuously, up
// to burst.
type Budget struct {
	Rate  float64
	Burst int
}

// TakeBudget takes one message from channelKey's budget and from
// overallKey's (both in one hash tag: Keys.Budget), or from neither: false
// when either is spent, with how long until both hold a message again.
func (s *Scripts) TakeBudget(ctx context.Context, channelKey, overallKey string, channel, overall Budget) (bool, time.Duration, error) {
	r, err := s.pair(ctx, alertBudget, AlertBudgetName, []string{channelKey, overallKey},
		strconv.FormatFloat(channel.Rate, 'f', -1, 64), channel.Burst, strconv.FormatFloat(overall.Rate, 'f', -1, 64), overall.Burst)
	if err != nil {
		return false, 0, err
	}
	switch {
	case r[0] == 1 && r[1] == 0:
		return true, 0, nil
	case r[0] == 0 && r[1] >= 0:
		return false, time.Duration(r[1]) * time.Millisecond, nil
	}
	return false, 0, s.fail(AlertBudgetName, fmt.Errorf("%w: %v", ErrUnexpectedReply, r))
}

// SettleAlert records that a claimed alert was sent, or failed for good;
// a failed alert gives the cooldown back if it still holds it.
func (s *Scripts) SettleAlert(ctx context.Context, cooldownKey, recordKey, id string, sent bool) error {
	return s.SettleAlerts(ctx, sent, Settlement{CooldownKey: cooldownKey, RecordKey: recordKey, ID: id})
}

// Settlement is one claimed alert whose outcome SettleAlerts records.
type Settlement struct{ CooldownKey, RecordKey, ID string }

// SettleAlerts records one outcome for several claimed alerts (a digest's)
// in one pipelined round trip, each alert_settle call on its own alert's
// keys: the fewer round trips between Slack taking a post and its alerts
// being recorded, the fewer a crash there makes post again.
func (s *Scripts) SettleAlerts(ctx context.Context, sent bool, alerts ...Settlement) error {
	outcome := "failed"
	if sent {
		outcome = "sent"
	}
	retention := seconds(s.cfg.Retention)
	args := func(a Settlement) ([]string, []any) {
		return []string{a.CooldownKey, a.RecordKey}, []any{a.ID, outcome, retention}
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(alerts))
	for i, a := range alerts {
		keys, argv := args(a)
		cmds[i] = alertSettle.EvalSha(ctx, pipe, keys, argv...)
	}
	_, _ = pipe.Exec(ctx)
	for i, a := range alerts {
		n, err := cmds[i].Int64()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			keys, argv := args(a)
			n, err = alertSettle.Run(ctx, s.rdb, keys, argv...).Int64()
		}
		if err != nil {
			return s.redisError(ctx, AlertSettleName, err)
		}
		switch n {
		case 1:
		case -1:
			return s.fail(AlertSettleName, ErrInvalidArguments)
		default:
			return s.fail(AlertSettleName, fmt.Errorf("%w: %d", ErrUnexpectedReply, n))
		}
	}
	return nil
}
