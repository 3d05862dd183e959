package lua

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/internal/redisonce"
)

// sentOnce lists the scripts that must not be resent after a lost reply (a
// timeout, a broken connection), with their names. Each reports a change
// once, and a second run answers that it was done already: outcome_open
// {2}, outcome_record 0, outcome_label 2, alert_observe {0}, alert_repeat 2
// or 4, alert_park 2. A resend after a first run that went through would
// hide the change while the call seemed to succeed, and it would go
// uncounted (fraudwatch_alert_outcomes_total and
// fraudwatch_outcomes_recorded_total, fraudwatch_alert_ack_seconds,
// fraudwatch_alert_repeats_total; fraudwatch_alerts_parked until the next
// retry pass). Not resent, a lost reply is the call's error, which its
// caller handles as any Redis failure. The other scripts answer a second
// run as the first (offsets, claims, records), or take one more message
// from a budget (alert_budget), which only delays one.
//
// How go-redis is kept from resending: internal/redisonce.
var sentOnce = map[*redis.Script]string{
	outcomeOpen:   OutcomeOpenName,
	outcomeRecord: OutcomeRecordName,
	outcomeLabel:  OutcomeLabelName,
	alertObserve:  AlertObserveName,
	alertRepeat:   AlertRepeatName,
	alertPark:     AlertParkName,
}

// run runs script as Script.Run does: EVALSHA, then EVAL when Redis
// answers NOSCRIPT (which ran nothing). A script of sentOnce is not
// resent.
func (s *Scripts) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	name, ok := sentOnce[script]
	if !ok {
		return script.Run(ctx, s.rdb, keys, args...)
	}
	cmd := scriptCmd(ctx, script, name, false, keys, args)
	_ = s.rdb.Process(ctx, redisonce.Cmd{Cmd: cmd}) // the error is cmd's
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = scriptCmd(ctx, script, name, true, keys, args)
		_ = s.rdb.Process(ctx, redisonce.Cmd{Cmd: cmd})
	}
	return cmd
}

// evalOrSha adds script's command to pipe: EVALSHA, or EVAL with eval. A
// script of sentOnce is not resent, nor are the commands of its node's
// part of the pipeline (the caller's runner answers every call that ran).
func evalOrSha(ctx context.Context, pipe redis.Pipeliner, script *redis.Script, eval bool, keys []string, args []any) *redis.Cmd {
	name, ok := sentOnce[script]
	switch {
	case !ok && eval:
		return script.Eval(ctx, pipe, keys, args...)
	case !ok:
		return script.EvalSha(ctx, pipe, keys, args...)
	}
	cmd := scriptCmd(ctx, script, name, eval, keys, args)
	_ = pipe.Process(ctx, redisonce.Cmd{Cmd: cmd})
	return cmd
}

// scriptCmd is the command of script (named name) with keys and args:
// EVALSHA, or EVAL with eval.
func scriptCmd(ctx context.Context, script *redis.Script, name string, eval bool, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	if eval {
		text, _ := Text(name)
		a = append(a, "eval", text)
	} else {
		a = append(a, "evalsha", script.Hash())
	}
	a = append(a, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3) // Redis Cluster routes it by its first key
	}
	return cmd
}
