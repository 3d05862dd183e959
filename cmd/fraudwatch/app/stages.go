package app

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/consumer"
)

// The rules engine runs inside the events consumer's Handle, and its
// Redis calls and alerts' hand-off run below it: they tell the batch's
// consumer.Timer how long they took (fraudwatch_event_stage_seconds), so
// that neither the engine nor the scripts know the consumer.

// stageHook times the Redis round trips made for an events batch
// (consumer.Redis); every other command passes untimed.
type stageHook struct{}

func (stageHook) DialHook(next redis.DialHook) redis.DialHook {
	return next
}

func (stageHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		t := consumer.TimerOf(ctx)
		if t == nil {
			return next(ctx, cmd)
		}
		start := time.Now()
		err := next(ctx, cmd)
		t.Add(consumer.Redis, time.Since(start))
		return err
	}
}

func (stageHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		t := consumer.TimerOf(ctx)
		if t == nil {
			return next(ctx, cmds)
		}
		start := time.Now()
		err := next(ctx, cmds)
		t.Add(consumer.Redis, time.Since(start))
		return err
	}
}

// publisher is the alerts topic, as the engine hands alerts to it.
type publisher interface {
	Publish(ctx context.Context, alerts ...alert.Alert) error
}

// timedAlerts times the hand-off of an events batch's alerts to the
// alerts topic (consumer.Alerts).
type timedAlerts struct{ publisher }

func (p timedAlerts) Publish(ctx context.Context, alerts ...alert.Alert) error {
	start := time.Now()
	err := p.publisher.Publish(ctx, alerts...)
	consumer.TimerOf(ctx).Add(consumer.Alerts, time.Since(start))
	return err
}
