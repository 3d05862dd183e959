package demo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// world is the demo's Kafka and Redis, in this process.
type world struct {
	kafka     *kfake.Cluster
	redis     *miniredis.Miniredis
	stopClock func()
	closeOnce sync.Once
}

// startWorld starts an in-process Kafka with the configuration's topics and
// an in-process Redis whose clock follows the real one, and points cfg at
// them.
func startWorld(cfg *config.Config) (*world, error) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(partitions, cfg.Kafka.OrdersTopic, cfg.Kafka.RefundsTopic),
		kfake.SeedTopics(1, cfg.Kafka.DeadLetterTopic),
		kfake.SeedTopics(partitions, cfg.Kafka.AlertsTopic),
		kfake.SeedTopics(partitions, cfg.Kafka.OutcomesTopic))
	if err != nil {
		return nil, fmt.Errorf("demo: start in-process kafka: %w", err)
	}
	mr, err := miniredis.Run()
	if err != nil {
		kc.Close()
		return nil, fmt.Errorf("demo: start in-process redis: %w", err)
	}
	w := &world{kafka: kc, redis: mr, stopClock: driveClock(mr)}
	cfg.Kafka.Brokers = kc.ListenAddrs()
	cfg.Redis.Addrs = []string{mr.Addr()}
	if err := cfg.Validate(); err != nil {
		w.close()
		return nil, fmt.Errorf("demo: configuration: %w", err)
	}
	return w, nil
}

// close stops the clock, Redis and Kafka. It is idempotent.
func (w *world) close() {
	w.closeOnce.Do(func() {
		w.stopClock()
		w.redis.Close()
		w.kafka.Close()
	})
}

// notifierFor prints alerts to the console and, when the configuration
// has a Slack section, sends them to Slack as well.

// traffic sends the generator's events to the orders and refunds topics,
// and its outcomes to the outcomes topic, until stopped.
type traffic struct {
	w *kafka.Writer
	// gen is the generator: read it holding turn, or once stopped.
	gen    *generator
	cancel context.CancelFunc
	done   chan error
	// failed is closed when the traffic stops by itself, which it only
	// does on failure.
	failed chan struct{}
	// turn is held by each step of the traffic; the reload holds it to
	// keep the traffic waiting.
	turn sync.Mutex

	mu   sync.Mutex
	sent produced
}

func startTraffic(ctx context.Context, seed uint64, cfg *config.Config, rec *recorder, settled func(context.Context, int) bool) *traffic {
	tr := &traffic{
		w: &kafka.Writer{
			Addr:         kafka.TCP(cfg.Kafka.Brokers...),
			Balancer:     &kafka.Murmur2Balancer{}, // key = customer_id, or a burst's (Burst.Key): their events stay in order
			RequiredAcks: kafka.RequireAll,
			BatchTimeout: 5 * time.Millisecond,
		},
		gen:    newGenerator(seed),
		done:   make(chan error, 1),
		failed: make(chan struct{}),
	}
	to := topics{orders: cfg.Kafka.OrdersTopic, refunds: cfg.Kafka.RefundsTopic, outcomes: cfg.Kafka.OutcomesTopic}
	ctx, tr.cancel = context.WithCancel(ctx)
	go func() {
		var w messageWriter = tr.w
		if rec != nil {
			rec.w, rec.outcomes, w = tr.w, to.outcomes, rec
		}
		sd := sender{g: tr.gen, w: w, to: to, turn: &tr.turn, settled: settled, report: func(p produced) {
			tr.mu.Lock()
			tr.sent = p
			tr.mu.Unlock()
		}}
		_, err := sd.send(ctx)
		if ctx.Err() == nil {
			close(tr.failed)
		}
		tr.done <- err
	}()
	return tr
}

// holdQuiet takes the traffic's turn at a moment when no burst that trips
// rule is under way, or once bound has passed. It says false, not holding
// the turn, when ctx ends first.
func (tr *traffic) holdQuiet(ctx context.Context, rule string, bound time.Duration) bool {
	tr.turn.Lock()
	for waited := time.Duration(0); !tr.gen.quiet(rule) && waited < bound; waited += tick {
		tr.turn.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-time.After(tick):
		}
		tr.turn.Lock()
	}
	return true
}

// truth is what the traffic planted and sent; call it once stopped.
func (tr *traffic) truth() Truth { return tr.gen.truth() }

// sentSoFar is what Kafka has acknowledged so far.
func (tr *traffic) sentSoFar() produced {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.sent
}

// stop ends the traffic and says what was sent, and why it failed if it
// did.
func (tr *traffic) stop() (produced, error) {
	tr.cancel()
	var failure error
	if err := <-tr.done; err != nil {
		failure = fmt.Errorf("demo: traffic generator: %w", err)
	}
	if err := tr.w.Close(); err != nil && failure == nil {
		failure = fmt.Errorf("demo: close traffic writer: %w", err)
	}
	return tr.sentSoFar(), failure
}

// buildConfig is the configuration of `fraudwatch run` pointed at the
// in-process Kafka and Redis. From a given configuration only the Slack
// section and the rules are kept. rulesFrom says where the rules came from.

// driveClock moves miniredis's clock along with the real one, so that
// windows and cooldowns end. The returned function stops it; it is
// idempotent.
func driveClock(mr *miniredis.Miniredis) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		last, wait := time.Now(), clockStep
		for {
			select {
			case <-done:
				return
			case <-time.After(wait):
			}
			now := time.Now()
			mr.FastForward(now.Sub(last))
			last, wait = now, clockWait(time.Since(now))
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-stopped
		})
	}
}

// clockWait is the wait before the clock's next step, after a step that
// took took. A step holds miniredis's lock while it visits every key; on a
// busy machine, with thousands of keys, that can take longer than
// clockStep, and steps back to back would leave the pipeline's commands
// little of the lock: the clock takes at most a fifth of it, in coarser
// steps. Each step moves it by the time passed, so TTLs stay true.
func clockWait(took time.Duration) time.Duration {
	return max(clockStep, 4*took)
}

// caughtUp waits until the pipeline has processed as many events as were
// sent and settled each crossing's alert, and says whether it has. It
// waits while the pipeline makes progress (events processed, alerts
// settled): up to catchUp without any, most in all, or until ctx ends.
// Redis's commands are no sign of progress: the dispatcher and the
// outcomes keep reading while a batch stands still.
func caughtUp(ctx context.Context, a *app.App, sent int, most time.Duration) bool {
	return waitFor(ctx, a, most, func(s snapshot) bool { return s.processed() >= float64(sent) && s.settled() })
}

// processedAll waits as caughtUp does, for the events only.
func processedAll(ctx context.Context, a *app.App, sent int, most time.Duration) bool {
	return waitFor(ctx, a, most, func(s snapshot) bool { return s.processed() >= float64(sent) })
}

func waitFor(ctx context.Context, a *app.App, most time.Duration, done func(snapshot) bool) bool {
	return catchingUp(ctx, func() (bool, float64) {
		s := gather(a)
		return done(s), s.progress()
	}, catchUp, most, 50*time.Millisecond)
}

// catchingUp polls look until it says done, and gives up after idle
// without its progress rising, after most in all, or when ctx ends.
func catchingUp(ctx context.Context, look func() (done bool, progress float64), idle, most, every time.Duration) bool {
	start := time.Now()
	last, lastAt := -1.0, start
	for {
		done, progress := look()
		if done {
			return true
		}
		now := time.Now()
		if progress > last {
			last, lastAt = progress, now
		}
		if now.Sub(lastAt) >= idle || now.Sub(start) >= most {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(every):
		}
	}
}
