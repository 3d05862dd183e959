package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/lua"
)

// ErrNotDelivered is returned by Deliver when every attempt failed with an
// error worth retrying (Slack down, 429s, timeouts). The alert is not lost:
// its caller keeps it (the alerts topic offset is not committed) and
// delivers it again later.
var ErrNotDelivered = errors.New("alert: not delivered yet")

// DispatcherConfig tunes delivery. Zero values take the defaults.
type DispatcherConfig struct {
	// MaxAttempts bounds the attempts of one Deliver call, 429s included.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential wait between failed
	// attempts that carry no Retry-After.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// MaxRetryAfter caps a server's Retry-After.
	MaxRetryAfter time.Duration
	// AttemptTimeout bounds one delivery attempt.
	AttemptTimeout time.Duration
	// KeyPrefix starts the Redis keys the dispatcher builds for the alerts
	// it reads (redis.key_prefix; default "fw").
	KeyPrefix string
	// ParkedRetry is how often parked alerts are tried again (default
	// 30 s): those whose channel the notifier refused.
	ParkedRetry time.Duration
	// ChannelBudget and OverallBudget bound the messages a notifier that
	// sends digests (Digester) gets, per channel (default 1 a second, up
	// to 3 at once: Slack's own limit) and in all (default 5 a second, up
	// to 15), shared by every replica. Past them, a batch's alerts go out
	// as one digest per rule, of which DigestSize (default 10) are listed.
	ChannelBudget lua.Budget
	OverallBudget lua.Budget
	DigestSize    int
}

// RuleSettings are what the dispatcher takes from a rule, and never from
// an alert's message: whether it notifies, its cooldown and its channel.
type RuleSettings struct {
	Mode     Mode
	Cooldown time.Duration
	Channel  string
}

// Reasons an alert read from the alerts topic is dropped: the reason label
// of fraudwatch_alerts_dropped_total.
const (
	DroppedUnreadable  = "unreadable"   // not an alert's JSON
	DroppedMalformed   = "malformed"    // a field out of bounds, or no group
	DroppedUnknownRule = "unknown_rule" // a rule not in force, after unknownRuleGrace
	DroppedRefused     = "refused"      // the claim script refused its arguments
	DroppedStale       = "stale"        // older than its delivery record would live
)

// unknownRuleGrace is how long an alert of a rule the dispatcher does not
// know is retried before it is dropped: replicas reload a changed rules
// file within a second of each other, and an alert of a rule just added
// may reach a replica that has not yet.
const unknownRuleGrace = time.Minute

func (c *DispatcherConfig) setDefaults() {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = 5 * time.Minute
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 15 * time.Second
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "fw"
	}
	if c.ParkedRetry == 0 {
		c.ParkedRetry = 30 * time.Second
	}
	if c.ChannelBudget == (lua.Budget{}) {
		c.ChannelBudget = lua.Budget{Rate: 1, Burst: 3}
	}
	if c.OverallBudget == (lua.Budget{}) {
		c.OverallBudget = lua.Budget{Rate: 5, Burst: 15}
	}
	if c.DigestSize == 0 {
		c.DigestSize = 10
	}
}

// Validate reports settings that cannot work.
func (c *DispatcherConfig) Validate() error {
	switch {
	case c.MaxAttempts < 1:
		return errors.New("alert: max attempts must be at least 1")
	case c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff:
		return errors.New("alert: backoff must satisfy 0 < min <= max")
	case c.MaxRetryAfter <= 0 || c.AttemptTimeout <= 0:
		return errors.New("alert: max retry-after and attempt timeout must be positive")
	}
	return nil
}

// claims is what the dispatcher needs from the Redis scripts: a decision
// per alert that every redelivery of it gets again, its outcome, and how
// long those records live.
type claims interface {
	ClaimAlert(ctx context.Context, cooldownKey, recordKey, id string, cooldown time.Duration, silences ...string) (lua.Claim, error)
	SettleAlert(ctx context.Context, cooldownKey, recordKey, id string, sent bool) error
	Retention() time.Duration
	// The parked alerts: those whose channel the notifier refuses.
	Park(ctx context.Context, key, id string, data []byte) error
	Parked(ctx context.Context, key string) (map[string]string, error)
	Unpark(ctx context.Context, key, id string) error
	Lease(ctx context.Context, key string, ttl time.Duration) (bool, error)
	Release(ctx context.Context, key string) error
	TakeBudget(ctx context.Context, channelKey, overallKey string, channel, overall lua.Budget) (bool, error)
}

// Digester is a Notifier that can also post many alerts of one rule as
// one message: the dispatcher then keeps to the alert budgets, and merges
// what is past them into digests.
type Digester interface {
	NotifyDigest(ctx context.Context, d Digest) error
}

// Digest is the alerts of one rule, from one batch of the alerts topic,
// that were past the budget: all of them count, List of them are shown.
type Digest struct {
	Rule    string
	Channel string
	Alerts  []Alert
	List    int
}

// Dispatcher delivers alerts through a Notifier, once each: it claims each
// alert in Redis (taking the (rule, group)'s cooldown), sends it, and
// records the outcome, so that an alert delivered again (the alerts topic
// is at least once) is neither posted twice nor suppressed by its own
// cooldown. It is safe for concurrent use.
type Dispatcher struct {
	cfg      DispatcherConfig
	notifier Notifier
	claims   claims
	keys     lua.Keys
	rules    atomic.Pointer[map[string]RuleSettings]
	dead     atomic.Pointer[deadLetterer]
	log      *slog.Logger
	m        dispatcherMetrics
	recent   recent
}

type dispatcherMetrics struct {
	sent       *prometheus.CounterVec
	suppressed *prometheus.CounterVec
	failures   *prometheus.CounterVec
	retries    *prometheus.CounterVec
	dropped    *prometheus.CounterVec
	parked     *prometheus.GaugeVec
	digested   *prometheus.CounterVec
}

// NewDispatcher returns a dispatcher that delivers through n and claims
// alerts with c.
func NewDispatcher(cfg DispatcherConfig, n Notifier, c claims, log *slog.Logger, reg prometheus.Registerer) (*Dispatcher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if n == nil || c == nil {
		return nil, errors.New("alert: dispatcher needs a notifier and the claim scripts")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := dispatcherMetrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_sent_total",
			Help: "Alerts delivered to the notifier (Slack, or the log).",
		}, []string{"rule"}),
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_suppressed_total",
			Help: "Crossings not notified: the cooldown was held, the rule is in shadow mode, or a silence ran.",
		}, []string{"rule", "reason"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alert_failures_total",
			Help: "Alerts given up on: the notifier refused them for good (bad token, unknown channel).",
		}, []string{"rule"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alert_delivery_errors_total",
			Help: "Failed delivery attempts that will be retried (Slack down, rate limited, timeouts).",
		}, []string{"rule"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_dropped_total",
			Help: "Messages of the alerts topic not delivered because they cannot be trusted or settled: unreadable, malformed, of an unknown rule, refused by the claim script, or stale.",
		}, []string{"reason"}),
		digested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_digested_total",
			Help: "Alerts sent as part of a digest, past the alert budget (also in fraudwatch_alerts_sent_total).",
		}, []string{"rule"}),
		parked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fraudwatch_alerts_parked",
			Help: "Alerts waiting because Slack refuses their channel (channel_not_found, not_in_channel, is_archived), by channel.",
		}, []string{"channel"}),
	}
	for _, r := range []string{DroppedUnreadable, DroppedMalformed, DroppedUnknownRule, DroppedRefused, DroppedStale} {
		m.dropped.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.sent, m.suppressed, m.failures, m.retries, m.dropped, m.parked, m.digested} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("alert: register metrics: %w", err)
			}
		}
	}
	keys, err := lua.NewKeys(cfg.KeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("alert: key prefix: %w", err)
	}
	d := &Dispatcher{cfg: cfg, notifier: n, claims: c, keys: keys, log: log, m: m}
	d.rules.Store(&map[string]RuleSettings{})
	return d, nil
}

// deadLetterer takes the alerts the dispatcher cannot trust or settle
// (consumer.Consumer's dead-letter topic).
type deadLetterer interface {
	DeadLetter(ctx context.Context, msg kafka.Message, why string) error
}

// SetDeadLetters makes the dispatcher write the messages it drops to a
// dead-letter topic, where an operator finds them; without one they are
// only counted and logged.
func (d *Dispatcher) SetDeadLetters(dl deadLetterer) { d.dead.Store(&dl) }

// drop counts and logs a message of the alerts topic that is not
// delivered, and writes it to the dead-letter topic; an error means the
// message must come round again.
func (d *Dispatcher) drop(ctx context.Context, msg kafka.Message, reason string, err error, where []any) error {
	if dl := d.dead.Load(); dl != nil {
		// err names the reason and the field, never a value (package
		// lua's errors do not quote group encodings either).
		if werr := (*dl).DeadLetter(ctx, msg, "alert "+reason+": "+err.Error()); werr != nil {
			return fmt.Errorf("alert: dead-letter an alert (%s): %w", reason, werr)
		}
	}
	d.m.dropped.WithLabelValues(reason).Inc()
	d.log.Error("alert dropped", append(where, "reason", reason, "err", err)...)
	return nil
}

// SetRules replaces the rules whose alerts the dispatcher delivers, by
// name, and exports their metrics from zero.
func (d *Dispatcher) SetRules(rules map[string]RuleSettings) {
	rs := maps.Clone(rules)
	for name, r := range rs {
		d.Track(name)
		// A series at 0 for each channel in use, so that an alert on
		// parked alerts has something to evaluate before the first one.
		d.m.parked.WithLabelValues(channelLabel(r.Channel))
	}
	d.rules.Store(&rs)
}

// Track exports zero-valued series for a rule, so that dashboards and
// rate() see it before its first alert.
func (d *Dispatcher) Track(rule string) {
	d.m.sent.WithLabelValues(rule)
	d.m.digested.WithLabelValues(rule)
	d.m.failures.WithLabelValues(rule)
	d.m.retries.WithLabelValues(rule)
	d.m.suppressed.WithLabelValues(rule, SuppressedCooldown)
	d.m.suppressed.WithLabelValues(rule, SuppressedShadow)
	d.m.suppressed.WithLabelValues(rule, SuppressedSilenced)
}

// HandleMessages settles a batch of the alerts topic's messages, in order:
// the dispatcher is the alerts group's handler. With a Digester, alerts
// past the budget wait for the end of the batch and go out as one digest
// per rule. It returns how many messages may be committed, and an error
// (see Deliver) when the next must come round again.
func (d *Dispatcher) HandleMessages(ctx context.Context, msgs []kafka.Message) (int, error) {
	digester, _ := d.notifier.(Digester)
	var held []heldAlert
	var heldIDs map[string]bool
	for i, msg := range msgs {
		a, ok, err := d.accept(ctx, msg)
		if err != nil {
			return d.flush(ctx, digester, held, i, err)
		}
		if !ok {
			continue
		}
		if heldIDs[a.ID] {
			// A second message of an alert already held in this batch (a
			// crossing published again after a crash): its claim would
			// read "pending" and say send, and the digest would carry the
			// alert twice. The digest that carries the first settles both;
			// should it fail, both come round again.
			continue
		}
		send, err := d.claim(ctx, a)
		if errors.Is(err, lua.ErrInvalidArguments) {
			// The script will refuse it every time: retrying would hold
			// the partition for ever.
			err = d.drop(ctx, msg, DroppedRefused, err, []any{"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset, "rule", a.Rule})
			if err != nil {
				return d.flush(ctx, digester, held, i, err)
			}
			continue
		}
		if err != nil {
			return d.flush(ctx, digester, held, i, err)
		}
		if !send {
			continue
		}
		if digester != nil {
			chKey, allKey := d.keys.Budget(a.Channel)
			ok, err := d.claims.TakeBudget(ctx, chKey, allKey, d.cfg.ChannelBudget, d.cfg.OverallBudget)
			if err != nil {
				return d.flush(ctx, digester, held, i, fmt.Errorf("alert: budget: %w", err))
			}
			if !ok {
				// Past the budget: claimed, it waits for its rule's digest.
				held = append(held, heldAlert{index: i, alert: a})
				if heldIDs == nil {
					heldIDs = map[string]bool{}
				}
				heldIDs[a.ID] = true
				continue
			}
		}
		if err := d.send(ctx, a); err != nil {
			return d.flush(ctx, digester, held, i, err)
		}
	}
	return d.flush(ctx, digester, held, len(msgs), nil)
}

// HandleMessage settles one message of the alerts topic. It returns nil
// once the message may be committed, an error (see Deliver) when it must
// come round again.
func (d *Dispatcher) HandleMessage(ctx context.Context, msg kafka.Message) error {
	_, err := d.HandleMessages(ctx, []kafka.Message{msg})
	return err
}

// accept reads a message of the alerts topic into an alert it can act on
// (trust); false when the message is settled already: dropped (to the
// dead-letter topic) or stale.
func (d *Dispatcher) accept(ctx context.Context, msg kafka.Message) (Alert, bool, error) {
	where := []any{"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset}
	a, err := Decode(msg.Value)
	if err != nil {
		// Only fraudwatch writes this topic; a message it cannot read is
		// a bug or a foreign writer, and no retry will make it readable.
		return Alert{}, false, d.drop(ctx, msg, DroppedUnreadable, errors.New("alert: not an alert's JSON"), where)
	}
	age := time.Since(msg.Time)
	if age > d.claims.Retention() {
		// Its delivery record may have expired: sending it now could post
		// it a second time, and days late it is news to nobody.
		d.m.dropped.WithLabelValues(DroppedStale).Inc()
		d.log.Warn("stale alert dropped", append(where, "age", age.Round(time.Second))...)
		return Alert{}, false, nil
	}
	a, reason, err := d.trust(a)
	switch {
	case reason == DroppedUnknownRule && age < unknownRuleGrace:
		return Alert{}, false, fmt.Errorf("alert: %w (retried for %v: this replica may not have reloaded its rules yet)", err, unknownRuleGrace)
	case err != nil:
		return Alert{}, false, d.drop(ctx, msg, reason, err, where)
	}
	return a, true, nil
}

// heldAlert is a claimed alert past the budget, with its message's index
// in the batch.
type heldAlert struct {
	index int
	alert Alert
}

// flush sends the held alerts as digests, then answers as HandleMessages
// does: n messages may be committed, err says why not more. Should a
// digest fail, the messages from the first held one on come round again
// (those settled meanwhile are recognised by their records).
func (d *Dispatcher) flush(ctx context.Context, dg Digester, held []heldAlert, n int, err error) (int, error) {
	if len(held) == 0 {
		return n, err
	}
	if derr := d.sendDigests(ctx, dg, held); derr != nil {
		return held[0].index, derr
	}
	return n, err
}

// MaxGroupFields bounds a rule's group_by, and so an alert's group: the
// configuration refuses more (rules.MaxGroupBy).
const MaxGroupFields = 64

// Bounds of an alert read from the topic. fraudwatch's own alerts stay
// far within them (rules.Engine clips what it writes).
const (
	maxIDBytes      = 128 // an event id (event.MaxIDBytes)
	maxValueBytes   = 1024 + len("…")
	maxTextBytes    = 1024 + len("…")
	maxFieldBytes   = 256 + len("…")
	maxRuleBytes    = 64
	maxCurrencyByte = 16 + len("…")
	// An evidence entry's order id and value (rules clips them to 128).
	maxEvidenceBytes = 128 + len("…")
)

// WithinBounds tells whether every field of a is within the bounds the
// dispatcher holds an alert read from the topic to; fraudwatch's own
// alerts always are.
func (a Alert) WithinBounds() error {
	switch {
	case a.Rule == "" || len(a.Rule) > maxRuleBytes || strings.ContainsAny(a.Rule, ":{} "):
		return fmt.Errorf("alert: rule name of %d bytes", len(a.Rule))
	case a.EventID == "" || len(a.EventID) > maxIDBytes:
		return fmt.Errorf("alert: event id of %d bytes", len(a.EventID))
	case len(a.GroupValues) == 0 || len(a.GroupValues) > MaxGroupFields || len(a.GroupBy) != len(a.GroupValues):
		return fmt.Errorf("alert: %d group values for %d fields", len(a.GroupValues), len(a.GroupBy))
	case len(a.OrderID) > maxTextBytes || len(a.Description) > maxTextBytes || len(a.Currency) > maxCurrencyByte || len(a.Field) > maxFieldBytes:
		return errors.New("alert: a text field too long")
	}
	for i := range a.GroupValues {
		if len(a.GroupValues[i]) > maxValueBytes || len(a.GroupBy[i]) > maxFieldBytes {
			return fmt.Errorf("alert: group field %d too long", i)
		}
	}
	if len(a.Evidence) > MaxEvidence {
		return fmt.Errorf("alert: %d orders of evidence", len(a.Evidence))
	}
	for i, e := range a.Evidence {
		if len(e.OrderID) > maxEvidenceBytes || len(e.EventID) > maxIDBytes || len(e.Value) > maxEvidenceBytes {
			return fmt.Errorf("alert: evidence %d too long", i)
		}
	}
	return nil
}

// trust makes an alert read from the topic one the dispatcher can act on
// without trusting its writer: its rule must be one in force, and the
// rule's settings replace the message's mode, cooldown and channel; every
// field must be within bounds; and its id and Redis keys are built here
// from its rule, group and event id, never taken from the message. On
// error, reason says why (a Dropped* reason).
func (d *Dispatcher) trust(a Alert) (Alert, string, error) {
	if err := a.WithinBounds(); err != nil {
		return Alert{}, DroppedMalformed, err
	}
	rs, ok := (*d.rules.Load())[a.Rule]
	if !ok {
		return Alert{}, DroppedUnknownRule, fmt.Errorf("alert: rule %s is not in force", a.Rule)
	}
	g, err := d.keys.ParseGroup(a.Group)
	if a.Group == "" {
		// Written before alerts named their group: its values then (cut
		// only beyond 1 KB) name it too.
		g, err = d.keys.Group(a.GroupValues), nil
	}
	if err != nil {
		return Alert{}, DroppedMalformed, fmt.Errorf("alert: %w", err)
	}
	a.Mode, a.Cooldown, a.Channel = rs.Mode, rs.Cooldown, rs.Channel
	a.ID = a.Rule + "/" + a.EventID
	a.CooldownKey = d.keys.Cooldown(g, a.Rule)
	a.RecordKey = d.keys.AlertRecord(g, a.Rule, a.EventID)
	a.SilenceKey = d.keys.Silences(g, a.Rule)
	a.RuleSilence = d.keys.RuleSilences(g, a.Rule)
	return a, "", nil
}

// Deliver settles one alert, outside any budget: it is sent, suppressed
// (cooldown, shadow or silence), recognised as sent before, given up on
// for good, or parked; then Deliver returns nil and the alert may be
// acknowledged. It returns an error, wrapping ErrNotDelivered when Slack
// kept failing, when the alert must be delivered again later.
func (d *Dispatcher) Deliver(ctx context.Context, a Alert) error {
	send, err := d.claim(ctx, a)
	if err != nil || !send {
		return err
	}
	return d.send(ctx, a)
}

// claim decides an alert (alert_claim): true when it is to be sent, now
// its; false when it is settled (shadow, suppressed, silenced, sent or
// given up before).
func (d *Dispatcher) claim(ctx context.Context, a Alert) (bool, error) {
	log := d.log.With("rule", a.Rule, "alert_id", a.ID)
	if a.Shadow() {
		d.m.suppressed.WithLabelValues(a.Rule, SuppressedShadow).Inc()
		d.recent.add(&a, SuppressedShadow)
		log.Info("shadow rule crossed its threshold; not notifying", "current", a.Current, "threshold", a.Threshold)
		return false, nil
	}
	var silences []string
	if a.SilenceKey != "" && a.RuleSilence != "" {
		silences = []string{a.SilenceKey, a.RuleSilence}
	}
	claim, err := d.claims.ClaimAlert(ctx, a.CooldownKey, a.RecordKey, a.ID, a.Cooldown, silences...)
	if err != nil {
		return false, fmt.Errorf("alert: claim %s: %w", a.ID, err)
	}
	switch claim {
	case lua.ClaimSuppressed:
		d.m.suppressed.WithLabelValues(a.Rule, SuppressedCooldown).Inc()
		d.recent.add(&a, SuppressedCooldown)
		log.Info("alert suppressed: the cooldown is held by an earlier alert")
		return false, nil
	case lua.ClaimSilenced:
		d.m.suppressed.WithLabelValues(a.Rule, SuppressedSilenced).Inc()
		d.recent.add(&a, SuppressedSilenced)
		log.Info("alert silenced: a silence of its rule or group runs")
		return false, nil
	case lua.ClaimSent:
		log.Info("alert already delivered; not posting it again")
		return false, nil
	case lua.ClaimFailed:
		log.Info("alert given up on before; not retrying it")
		return false, nil
	}
	return true, nil
}

// send posts a claimed alert, retrying as RetryPolicy says, and records
// the outcome; an alert whose channel is refused is parked.
func (d *Dispatcher) send(ctx context.Context, a Alert) error {
	log := d.log.With("rule", a.Rule, "alert_id", a.ID)
	var err error
	backoff := d.cfg.MinBackoff
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, d.cfg.AttemptTimeout)
		err = d.notifier.Notify(actx, a)
		cancel()
		if err == nil {
			if err := d.settle(ctx, a, true); err != nil {
				return err
			}
			d.m.sent.WithLabelValues(a.Rule).Inc()
			d.recent.add(&a, OutcomeSent)
			log.Info("alert sent", "attempt", attempt)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("alert: deliver %s: %w", a.ID, ctx.Err())
		}
		if ce, ok := errors.AsType[*ChannelError](err); ok {
			// Its channel is the problem, not Slack: the alerts of other
			// channels behind it on this partition must not wait for it.
			return d.park(ctx, a, ce, log)
		}
		retry, wait := RetryPolicy(err)
		if !retry {
			if err := d.settle(ctx, a, false); err != nil {
				return err
			}
			d.m.failures.WithLabelValues(a.Rule).Inc()
			d.recent.add(&a, OutcomeFailed)
			log.Error("alert refused for good; given up, cooldown released", "err", err)
			return nil
		}
		d.m.retries.WithLabelValues(a.Rule).Inc()
		if attempt == d.cfg.MaxAttempts {
			log.Warn("alert not delivered yet; it stays queued", "attempts", attempt, "err", err)
			return fmt.Errorf("%w: %s: %d attempts, last: %w", ErrNotDelivered, a.ID, attempt, err)
		}
		if wait > 0 {
			wait = min(wait, d.cfg.MaxRetryAfter)
		} else {
			wait = backoff
			backoff = min(2*backoff, d.cfg.MaxBackoff)
		}
		log.Warn("alert delivery failed; will retry", "attempt", attempt, "retry_in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("alert: deliver %s: %w", a.ID, ctx.Err())
		}
	}
}

// sendDigests posts the held alerts, one digest per rule in the order of
// their first alert, each retried as a single alert is, and settles every
// alert by the digest that carried it: sent, given up with it, or parked
// with it when its channel is refused.
func (d *Dispatcher) sendDigests(ctx context.Context, dg Digester, held []heldAlert) error {
	var order []string
	byRule := map[string][]Alert{}
	for _, h := range held {
		if byRule[h.alert.Rule] == nil {
			order = append(order, h.alert.Rule)
		}
		byRule[h.alert.Rule] = append(byRule[h.alert.Rule], h.alert)
	}
	for _, rule := range order {
		alerts := byRule[rule]
		digest := Digest{Rule: rule, Channel: alerts[0].Channel, Alerts: alerts, List: d.cfg.DigestSize}
		log := d.log.With("rule", rule, "alerts", len(alerts))
		backoff := d.cfg.MinBackoff
		for attempt := 1; ; attempt++ {
			actx, cancel := context.WithTimeout(ctx, d.cfg.AttemptTimeout)
			err := dg.NotifyDigest(actx, digest)
			cancel()
			if err == nil {
				for _, a := range alerts {
					if err := d.settle(ctx, a, true); err != nil {
						return err
					}
					d.recent.add(&a, OutcomeDigested)
				}
				d.m.sent.WithLabelValues(rule).Add(float64(len(alerts)))
				d.m.digested.WithLabelValues(rule).Add(float64(len(alerts)))
				log.Info("alerts past the budget sent as one digest", "attempt", attempt)
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("alert: digest of %s: %w", rule, ctx.Err())
			}
			if ce, ok := errors.AsType[*ChannelError](err); ok {
				for _, a := range alerts {
					if err := d.park(ctx, a, ce, log.With("alert_id", a.ID)); err != nil {
						return err
					}
				}
				break
			}
			retry, wait := RetryPolicy(err)
			if !retry {
				for _, a := range alerts {
					if err := d.settle(ctx, a, false); err != nil {
						return err
					}
					d.recent.add(&a, OutcomeFailed)
				}
				d.m.failures.WithLabelValues(rule).Add(float64(len(alerts)))
				log.Error("digest refused for good; its alerts given up, cooldowns released", "err", err)
				break
			}
			d.m.retries.WithLabelValues(rule).Inc()
			if attempt == d.cfg.MaxAttempts {
				log.Warn("digest not delivered yet; its alerts stay queued", "attempts", attempt, "err", err)
				return fmt.Errorf("%w: digest of %s: %d attempts, last: %w", ErrNotDelivered, rule, attempt, err)
			}
			if wait > 0 {
				wait = min(wait, d.cfg.MaxRetryAfter)
			} else {
				wait = backoff
				backoff = min(2*backoff, d.cfg.MaxBackoff)
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return fmt.Errorf("alert: digest of %s: %w", rule, ctx.Err())
			}
		}
	}
	return nil
}

// park keeps a claimed alert whose channel the notifier refuses in Redis,
// for RetryParked; then the alert may be acknowledged.
func (d *Dispatcher) park(ctx context.Context, a Alert, ce *ChannelError, log *slog.Logger) error {
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("alert: park %s: %w", a.ID, err)
	}
	if err := d.claims.Park(ctx, d.keys.Parked(), a.ID, data); err != nil {
		return fmt.Errorf("alert: park %s: %w", a.ID, err)
	}
	// The rule's channel, as RetryParked counts it; the log names the
	// channel Slack refused, the default's own name included.
	d.m.parked.WithLabelValues(channelLabel(a.Channel)).Inc()
	d.recent.add(&a, OutcomeParked)
	log.Warn("alert parked: slack refuses its channel; other channels' alerts go on, and it is retried",
		"channel", ce.Channel, "err", ce.Err)
	return nil
}

// RetryParkedEvery runs RetryParked every ParkedRetry until ctx ends.
func (d *Dispatcher) RetryParkedEvery(ctx context.Context) {
	t := time.NewTicker(d.cfg.ParkedRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := d.RetryParked(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn("retrying parked alerts", "err", err)
			}
		}
	}
}

// RetryParked tries once more each parked alert that no other replica is
// trying: it is posted, or stays parked while its channel is refused, or
// is forgotten when it was settled meanwhile. It also sets
// fraudwatch_alerts_parked from what is parked.
func (d *Dispatcher) RetryParked(ctx context.Context) error {
	all, err := d.claims.Parked(ctx, d.keys.Parked())
	if err != nil {
		return fmt.Errorf("alert: retry parked alerts: %w", err)
	}
	waiting := map[string]float64{}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		var a Alert
		if err := json.Unmarshal([]byte(all[id]), &a); err != nil || a.ID != id {
			_ = d.claims.Unpark(ctx, d.keys.Parked(), id)
			continue
		}
		// Two replicas must never post one alert: one lease a try, longer
		// than the try.
		ok, err := d.claims.Lease(ctx, d.keys.ParkedLease(id), 2*d.cfg.AttemptTimeout)
		if err != nil {
			return fmt.Errorf("alert: retry parked alerts: %w", err)
		}
		if ok {
			still, err := d.retryParked(ctx, a)
			// The next pass may try again at once; a crash leaves the
			// lease to run out.
			_ = d.claims.Release(ctx, d.keys.ParkedLease(id))
			if err != nil {
				return err
			}
			if !still {
				continue
			}
		}
		waiting[channelLabel(a.Channel)]++
	}
	d.m.parked.Reset()
	for ch, n := range waiting {
		d.m.parked.WithLabelValues(ch).Set(n)
	}
	return nil
}

// retryParked tries one parked alert once; still says it stays parked.
func (d *Dispatcher) retryParked(ctx context.Context, a Alert) (still bool, err error) {
	log := d.log.With("rule", a.Rule, "alert_id", a.ID, "channel", a.Channel)
	var silences []string
	if a.SilenceKey != "" && a.RuleSilence != "" {
		silences = []string{a.SilenceKey, a.RuleSilence}
	}
	claim, err := d.claims.ClaimAlert(ctx, a.CooldownKey, a.RecordKey, a.ID, a.Cooldown, silences...)
	if err != nil {
		return true, fmt.Errorf("alert: claim parked %s: %w", a.ID, err)
	}
	if claim == lua.ClaimSend {
		actx, cancel := context.WithTimeout(ctx, d.cfg.AttemptTimeout)
		notifyErr := d.notifier.Notify(actx, a)
		cancel()
		if _, refused := errors.AsType[*ChannelError](notifyErr); refused || (notifyErr != nil && isRetryable(notifyErr)) {
			return true, nil
		}
		if err := d.settle(ctx, a, notifyErr == nil); err != nil {
			return true, err
		}
		if notifyErr == nil {
			d.m.sent.WithLabelValues(a.Rule).Inc()
			d.recent.add(&a, OutcomeSent)
			log.Info("parked alert sent")
		} else {
			d.m.failures.WithLabelValues(a.Rule).Inc()
			d.recent.add(&a, OutcomeFailed)
			log.Error("parked alert refused for good; given up", "err", notifyErr)
		}
	}
	// Settled now, or before (by a redelivery, a silence, the cooldown).
	if err := d.claims.Unpark(ctx, d.keys.Parked(), a.ID); err != nil {
		return true, fmt.Errorf("alert: %w", err)
	}
	return false, nil
}

func isRetryable(err error) bool {
	retry, _ := RetryPolicy(err)
	return retry
}

// channelLabel names a channel in the parked gauge; "" is the notifier's
// default channel.
func channelLabel(ch string) string {
	if ch == "" {
		return "(default)"
	}
	return ch
}

// settle records the outcome of a claimed alert. It insists: an alert sent
// but not recorded as sent would be posted again by a redelivery. So it
// does not give up when ctx ends (a shutdown, a rebalance cutting work
// short, right after Slack took the post) but keeps trying for a bounded
// while on its own.
func (d *Dispatcher) settle(ctx context.Context, a Alert, sent bool) error {
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(settleFor)
	backoff := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := d.claims.SettleAlert(actx, a.CooldownKey, a.RecordKey, a.ID, sent)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("alert: record outcome of %s: %w", a.ID, err)
		}
		d.log.Warn("recording the alert's outcome failed; retrying", "rule", a.Rule, "alert_id", a.ID, "err", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// settleFor bounds how long settle keeps trying.
const settleFor = 10 * time.Second
