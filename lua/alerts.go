package lua

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Claim is alert_claim's decision about one alert for one receiver.
type Claim int

// Claims.
const (
	// ClaimSuppressed: another alert holds the (rule, group)'s cooldown.
	ClaimSuppressed Claim = 0
	// ClaimSend: send it; the cooldown is this alert's and the claim the
	// claimant's.
	ClaimSend Claim = 1
	// ClaimSent: this alert was delivered before; do not post it again.
	ClaimSent Claim = 2
	// ClaimFailed: this alert was given up on before.
	ClaimFailed Claim = 3
	// ClaimSilenced: a silence of the rule or of the alert's group runs.
	ClaimSilenced Claim = 4
	// ClaimElsewhere: another claimant holds the alert, pending; its own
	// message stays uncommitted until it settles, so this copy needs no
	// post.
	ClaimElsewhere Claim = 5
)

// AlertClaim names one claim: an alert, the receiver's record of it, and
// who claims it.
type AlertClaim struct {
	// CooldownKey is the (rule, group)'s cooldown (Keys.Cooldown): one for
	// every receiver, so that all of an alert's receivers get the same
	// cooldown decision.
	CooldownKey string
	// RecordKey is the alert's record for the receiver (Keys.Record);
	// LegacyKey its record as versions before records per receiver wrote
	// it (Keys.AlertRecord), which the claim reads, never writes.
	RecordKey string
	LegacyKey string
	// AlertKey is the alert's hash (Keys.Alert): the send decision its
	// first claim made, which every receiver's claim follows, and its
	// life.
	AlertKey string
	// Alert is the alert's JSON as the dispatcher trusts it, at most
	// MaxAlertJSON bytes, which the claim that decides to send it keeps
	// as its life's copy (for updates and lists); nil keeps no life.
	Alert []byte
	// ID is the alert's id; Claimant who claims it (1 to MaxClaimant
	// bytes): the place of the message that carries it, which a crash
	// delivers again as it was (ClaimantOf), or ParkedClaimant.
	ID       string
	Claimant string
	// Cooldown is the rule's (0: none).
	Cooldown time.Duration
	// SilenceKey and RuleSilenceKey, when both given, are the (rule,
	// group)'s and the rule's silences (Keys.Silences, Keys.RuleSilences):
	// a silence that runs silences the alert.
	SilenceKey     string
	RuleSilenceKey string
}

// MaxClaimant bounds a claimant's name, as the scripts take it.
const MaxClaimant = 512

// MaxAlertJSON bounds the alert an alert's hash keeps (AlertClaim.Alert).
const MaxAlertJSON = 1 << 20

// ParkedClaimant is the claimant of parked alerts: a parked alert's claim
// passes to it (SettleParked), and the retries of parked alerts, one
// replica at a time, claim with it.
const ParkedClaimant = "parked"

// ClaimantOf names a message of a topic as a claimant: its place, which
// no other message shares and which a redelivery keeps.
func ClaimantOf(topic string, partition int, offset int64) string {
	return topic + "/" + strconv.Itoa(partition) + "/" + strconv.FormatInt(offset, 10)
}

// ClaimAlert decides whether the alert c names may be sent through the
// receiver whose record c.RecordKey is, and gives the send to c.Claimant
// alone: while the record is pending under another claimant, the answer
// is ClaimElsewhere. The decision is the alert's, made by its first claim
// of any receiver (taking the cooldown when free) and followed by every
// other: a receiver that comes later sends what the first sent, whatever
// the cooldown says by then; a silence begun meanwhile still silences what
// a receiver holds pending (waiting, parked). Every redelivery of one
// alert gets the same decision for as long as its record lives
// (Retention).
func (s *Scripts) ClaimAlert(ctx context.Context, c AlertClaim) (Claim, error) {
	keys, args, err := s.claimArgs(c)
	if err != nil {
		return 0, err
	}
	n, err := s.single(ctx, alertClaim, AlertClaimName, keys, args...)
	if err != nil {
		return 0, err
	}
	return s.claimOf(n)
}

// claimArgs are alert_claim's keys and arguments for c.
func (s *Scripts) claimArgs(c AlertClaim) (keys []string, args []any, err error) {
	if c.AlertKey == "" {
		return nil, nil, s.fail(AlertClaimName, fmt.Errorf("%w: no alert key", ErrInvalidArguments))
	}
	keys = []string{c.CooldownKey, c.RecordKey, c.LegacyKey, c.AlertKey}
	if c.SilenceKey != "" && c.RuleSilenceKey != "" {
		keys = append(keys, c.SilenceKey, c.RuleSilenceKey)
	}
	return keys, []any{c.ID, seconds(c.Cooldown), seconds(s.cfg.Retention), c.Claimant, c.Alert}, nil
}

// claimOf reads alert_claim's reply, its error contract read already.
func (s *Scripts) claimOf(n int64) (Claim, error) {
	if n < 0 || n > 5 {
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
			n, err = s.run(ctx, silenceAdd, []string{k}, id, ends.UnixMilli()).Int64()
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

// Ending is how claimed alerts end for their receiver, as SettleAlerts
// records it.
type Ending string

// Endings.
const (
	// SettleSent: delivered; the record keeps the receipt.
	SettleSent Ending = "sent"
	// SettleFailed: refused for good; the cooldown goes back if the alert
	// still holds it and no other receiver sent it or holds its send.
	SettleFailed Ending = "failed"
	// SettleParked: not ended but parked: the claim passes from the
	// claimant to ParkedClaimant, if the claimant still holds it.
	SettleParked Ending = "parked"
)

// MaxReceipt bounds a receipt as a record keeps it.
const MaxReceipt = 512

// Settlement is one claimed alert whose ending SettleAlerts records.
type Settlement struct {
	// AlertKey is the alert's hash (AlertClaim.AlertKey).
	CooldownKey, RecordKey, AlertKey, ID string
	// Claimant is the claim's (AlertClaim.Claimant).
	Claimant string
	// Receipt is what the receiver gave back for the message that carried
	// the alert, at most MaxReceipt bytes, "" for none: SettleSent only.
	Receipt string
}

// SettleAlerts records one ending for several claimed alerts (a digest's)
// in one pipelined round trip, each alert_settle call on its own alert's
// keys: the fewer round trips between Slack taking a post and its alerts
// being recorded, the fewer a crash there makes post again. A parked
// alert whose claim its claimant no longer holds (settled, or claimed by
// another since) is left as it is.
func (s *Scripts) SettleAlerts(ctx context.Context, end Ending, alerts ...Settlement) error {
	for _, a := range alerts {
		if a.AlertKey == "" {
			return s.fail(AlertSettleName, fmt.Errorf("%w: no alert key", ErrInvalidArguments))
		}
	}
	retention := seconds(s.cfg.Retention)
	args := func(a Settlement) ([]string, []any) {
		return []string{a.CooldownKey, a.RecordKey, a.AlertKey}, []any{a.ID, string(end), retention, a.Claimant, a.Receipt}
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
			n, err = s.run(ctx, alertSettle, keys, argv...).Int64()
		}
		if err != nil {
			return s.redisError(ctx, AlertSettleName, err)
		}
		switch {
		case n == 1, n == 0 && end == SettleParked:
		case n == -1:
			return s.fail(AlertSettleName, ErrInvalidArguments)
		default:
			return s.fail(AlertSettleName, fmt.Errorf("%w: %d", ErrUnexpectedReply, n))
		}
	}
	return nil
}
