// Package lua holds fraudwatch's Redis scripts, the typed Go calls that run
// them, and the layout of the keys they work on (Keys). Every decision that
// several replicas could race on (did this event cross the threshold first?
// how much is left after this refund?) is made by one of these scripts
// inside Redis, where it runs atomically.
//
// Scripts are called by SHA (EVALSHA). When Redis answers NOSCRIPT (after a
// restart, a failover or SCRIPT FLUSH), single calls fall back to EVAL
// (go-redis's Script.Run), and the pipelined counting calls of a Batch load
// the scripts and send the refused calls again.
package lua

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Script names, as used in errors and in the script label of
// fraudwatch_script_errors_total.
const (
	IncrAndCheckName     = "incr_and_check"
	SlideAndCheckName    = "slide_and_check"
	DistinctAndCheckName = "distinct_and_check"
	SalesDecrName        = "sales_decr"
	AlertClaimName       = "alert_claim"
	AlertSettleName      = "alert_settle"
	SilenceAddName       = "silence_add"
	AlertBudgetName      = "alert_budget"
	EvidenceAddName      = "evidence_add"
	AlertParkName        = "alert_park"
	AlertAckName         = "alert_ack"
	AlertWaitName        = "alert_wait"
	AlertLifeName        = "alert_life"
	AlertShownName       = "alert_shown"
	AlertObserveName     = "alert_observe"
	AlertIndexName       = "alert_index"
	AlertRepeatName      = "alert_repeat"
	OutcomeOpenName      = "outcome_open"
	OutcomeRecordName    = "outcome_record"
	OutcomeLabelName     = "outcome_label"
)

var (
	// prelude is what the four counting scripts share, prepended to each
	// (and to evidence_add, for its decoder): their text, and so their
	// SHA1, includes it.
	//go:embed prelude.lua
	prelude string
	//go:embed incr_and_check.lua
	incrAndCheckSrc string
	//go:embed sales_decr.lua
	salesDecrSrc string
	//go:embed slide_and_check.lua
	slideAndCheckSrc string
	//go:embed distinct_and_check.lua
	distinctAndCheckSrc string
	//go:embed alert_claim.lua
	alertClaimSrc string
	//go:embed alert_settle.lua
	alertSettleSrc string
	//go:embed silence_add.lua
	silenceAddSrc string
	//go:embed alert_budget.lua
	alertBudgetSrc string
	//go:embed evidence_add.lua
	evidenceAddSrc string
	//go:embed alert_park.lua
	alertParkSrc string
	//go:embed alert_ack.lua
	alertAckSrc string
	//go:embed alert_wait.lua
	alertWaitSrc string
	//go:embed alert_life.lua
	alertLifeSrc string
	//go:embed alert_shown.lua
	alertShownSrc string
	//go:embed alert_observe.lua
	alertObserveSrc string
	//go:embed alert_index.lua
	alertIndexSrc string
	//go:embed alert_repeat.lua
	alertRepeatSrc string
	// outcomePrelude is what the three outcome scripts share, prepended
	// to each as prelude is to the counting scripts.
	//go:embed outcome_prelude.lua
	outcomePrelude string
	//go:embed outcome_open.lua
	outcomeOpenSrc string
	//go:embed outcome_record.lua
	outcomeRecordSrc string
	//go:embed outcome_label.lua
	outcomeLabelSrc string

	incrAndCheck     = redis.NewScript(prelude + incrAndCheckSrc)
	salesDecr        = redis.NewScript(prelude + salesDecrSrc)
	slideAndCheck    = redis.NewScript(prelude + slideAndCheckSrc)
	distinctAndCheck = redis.NewScript(prelude + distinctAndCheckSrc)
	alertClaim       = redis.NewScript(alertClaimSrc)
	alertSettle      = redis.NewScript(alertSettleSrc)
	silenceAdd       = redis.NewScript(silenceAddSrc)
	alertBudget      = redis.NewScript(alertBudgetSrc)
	evidenceAdd      = redis.NewScript(prelude + evidenceAddSrc)
	alertPark        = redis.NewScript(alertParkSrc)
	alertAck         = redis.NewScript(alertAckSrc)
	alertWait        = redis.NewScript(alertWaitSrc)
	alertLife        = redis.NewScript(alertLifeSrc)
	alertShown       = redis.NewScript(alertShownSrc)
	alertObserve     = redis.NewScript(alertObserveSrc)
	alertIndex       = redis.NewScript(alertIndexSrc)
	alertRepeat      = redis.NewScript(alertRepeatSrc)
	outcomeOpen      = redis.NewScript(outcomePrelude + outcomeOpenSrc)
	outcomeRecord    = redis.NewScript(outcomePrelude + outcomeRecordSrc)
	outcomeLabel     = redis.NewScript(outcomePrelude + outcomeLabelSrc)

	// The counting scripts' and evidence_add's hashes, which their calls
	// send by pointer (see command, newEvidenceCall).
	incrAndCheckSHA     = incrAndCheck.Hash()
	salesDecrSHA        = salesDecr.Hash()
	slideAndCheckSHA    = slideAndCheck.Hash()
	distinctAndCheckSHA = distinctAndCheck.Hash()
	evidenceAddSHA      = evidenceAdd.Hash()

	// all lists every script with its name, for Load and the metric.
	all = []struct {
		name   string
		script *redis.Script
	}{
		{IncrAndCheckName, incrAndCheck},
		{SalesDecrName, salesDecr},
		{SlideAndCheckName, slideAndCheck},
		{DistinctAndCheckName, distinctAndCheck},
		{AlertClaimName, alertClaim},
		{AlertSettleName, alertSettle},
		{SilenceAddName, silenceAdd},
		{AlertBudgetName, alertBudget},
		{EvidenceAddName, evidenceAdd},
		{AlertParkName, alertPark},
		{AlertAckName, alertAck},
		{AlertWaitName, alertWait},
		{AlertLifeName, alertLife},
		{AlertShownName, alertShown},
		{AlertObserveName, alertObserve},
		{AlertIndexName, alertIndex},
		{AlertRepeatName, alertRepeat},
		{OutcomeOpenName, outcomeOpen},
		{OutcomeRecordName, outcomeRecord},
		{OutcomeLabelName, outcomeLabel},
	}
)

// ErrInvalidArguments is returned when a script answered with its error
// contract ({-1, -1}): it judged an argument unusable and wrote nothing.
var ErrInvalidArguments = errors.New("script rejected its arguments")

// ErrUnexpectedReply is returned when a script's reply does not have the
// shape of its contract (a different script under the same SHA, or a bug).
var ErrUnexpectedReply = errors.New("unexpected script reply")

// scripter is the part of a go-redis client the scripts need; *redis.Client,
// *redis.ClusterClient and *redis.Ring all satisfy it.
type scripter interface {
	Pipeline() redis.Pipeliner
	Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
	EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
	EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
	ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd
	ScriptLoad(ctx context.Context, script string) *redis.StringCmd
	Process(ctx context.Context, cmd redis.Cmder) error // a command sent once (once.go)
}

// Config tunes the scripts. Zero values take the defaults.
type Config struct {
	// Retention is how long the records that outlive a window live
	// (default 7 days). One lifetime serves both kinds:
	//
	//   - The marks of the events that crossed a threshold. A redelivery is
	//     answered "crossed first" again and hands its alert off again.
	//   - Alerts' delivery records, which answer every later copy of an alert.
	//
	// A crossing mark that outlived its alert's record would let a late
	// redelivery post the alert twice. The dispatcher skips alerts older
	// than Retention.
	Retention time.Duration
}

func (c *Config) setDefaults() {
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
}

// Validate reports settings that cannot work.
func (c *Config) Validate() error {
	if c.Retention < time.Second {
		return errors.New("lua: Retention must be at least a second")
	}
	return nil
}

// Scripts runs fraudwatch's scripts against one Redis (or Redis Cluster).
// It is safe for concurrent use.
type Scripts struct {
	cfg    Config
	rdb    scripter
	errors *prometheus.CounterVec
}

// New returns Scripts that run against rdb and count failures in
// fraudwatch_script_errors_total{script} on reg (nil reg: not registered).
func New(cfg Config, rdb scripter, reg prometheus.Registerer) (*Scripts, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rdb == nil {
		return nil, errors.New("lua: nil redis client")
	}
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fraudwatch_script_errors_total",
		Help: "Script calls that failed: Redis errors, or the script's own error contract.",
	}, []string{"script"})
	for _, sc := range all {
		errs.WithLabelValues(sc.name) // export zeroes, so rate() works from the start
	}
	if reg != nil {
		if err := reg.Register(errs); err != nil {
			return nil, fmt.Errorf("lua: register metrics: %w", err)
		}
	}
	return &Scripts{cfg: cfg, rdb: rdb, errors: errs}, nil
}

// DefaultRetention is Config.Retention's default: a week.
const DefaultRetention = 7 * 24 * time.Hour

// Retention is how long crossing marks and alert delivery records live.
func (s *Scripts) Retention() time.Duration { return s.cfg.Retention }

// Load sends every script to Redis (SCRIPT LOAD; on a cluster, to every
// primary). It is not required, since calls fall back to EVAL, but at
// start-up it proves that Redis answers and accepts the scripts.
func (s *Scripts) Load(ctx context.Context) error {
	for _, sc := range all {
		if err := sc.script.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("lua: load %s: %w", sc.name, err)
		}
	}
	return nil
}

// single executes a script that answers one integer, -1 meaning the error
// contract.
func (s *Scripts) single(ctx context.Context, script *redis.Script, name string, keys []string, args ...any) (int64, error) {
	n, err := s.run(ctx, script, keys, args...).Int64()
	if err != nil {
		return 0, s.redisError(ctx, name, err)
	}
	if n == -1 {
		return 0, s.fail(name, ErrInvalidArguments)
	}
	return n, nil
}

// pair executes a script that answers two integers, {-1, -1} meaning the
// error contract.
func (s *Scripts) pair(ctx context.Context, script *redis.Script, name string, keys []string, args ...any) ([2]int64, error) {
	vals, err := s.run(ctx, script, keys, args...).Int64Slice()
	if err != nil {
		return [2]int64{}, s.redisError(ctx, name, err)
	}
	if len(vals) != 2 {
		return [2]int64{}, s.fail(name, fmt.Errorf("%w: %v", ErrUnexpectedReply, vals))
	}
	if vals[0] == -1 && vals[1] == -1 {
		return [2]int64{}, s.fail(name, ErrInvalidArguments)
	}
	return [2]int64{vals[0], vals[1]}, nil
}

func (s *Scripts) redisError(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		// Shutting down, not a script failure.
		return fmt.Errorf("lua: %s: %w", name, err)
	}
	if _, reply := errors.AsType[redis.Error](err); !reply {
		// No answer at all: on a cluster, a master may have died and its
		// replica taken its slots over. go-redis would notice only at its
		// next periodic reload of the slot map (a minute); the retry of
		// this call should find the new master.
		if r, ok := s.rdb.(stateReloader); ok {
			r.ReloadState(ctx)
		}
	}
	return s.fail(name, err)
}

// stateReloader is a cluster client, whose map of slots to nodes can be
// read again.
type stateReloader interface {
	ReloadState(ctx context.Context)
}

func (s *Scripts) fail(name string, err error) error {
	s.errors.WithLabelValues(name).Inc()
	return fmt.Errorf("lua: %s: %w", name, err)
}

// seconds converts a window to the whole seconds the scripts take, rounding
// up so that a sub-second remainder never shortens a window. Zero and
// negative durations stay non-positive for the script to reject.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return int64(d / time.Second)
	}
	return int64((d + time.Second - 1) / time.Second)
}

// Text is the text of script name as Redis runs it (its prelude
// included), false for no script of that name.
func Text(name string) (string, bool) {
	text, ok := map[string]string{
		IncrAndCheckName:     prelude + incrAndCheckSrc,
		SalesDecrName:        prelude + salesDecrSrc,
		SlideAndCheckName:    prelude + slideAndCheckSrc,
		DistinctAndCheckName: prelude + distinctAndCheckSrc,
		AlertClaimName:       alertClaimSrc,
		AlertSettleName:      alertSettleSrc,
		SilenceAddName:       silenceAddSrc,
		AlertBudgetName:      alertBudgetSrc,
		EvidenceAddName:      prelude + evidenceAddSrc,
		AlertParkName:        alertParkSrc,
		AlertAckName:         alertAckSrc,
		AlertWaitName:        alertWaitSrc,
		AlertLifeName:        alertLifeSrc,
		AlertShownName:       alertShownSrc,
		AlertObserveName:     alertObserveSrc,
		AlertIndexName:       alertIndexSrc,
		AlertRepeatName:      alertRepeatSrc,
		OutcomeOpenName:      outcomePrelude + outcomeOpenSrc,
		OutcomeRecordName:    outcomePrelude + outcomeRecordSrc,
		OutcomeLabelName:     outcomePrelude + outcomeLabelSrc,
	}[name]
	return text, ok
}
