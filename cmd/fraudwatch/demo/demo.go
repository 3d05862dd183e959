// Package demo runs the whole fraudwatch pipeline with nothing installed: an
// in-process Kafka (kfake) and Redis (miniredis), a traffic generator that
// mixes ordinary shoppers with fraud, and a console that prints alerts as
// they fire. The pipeline itself is the one `fraudwatch run` uses (package
// app); only its endpoints differ.
package demo

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/config"
)

//go:embed rules.yaml
var builtinRules []byte

// builtinRulesName is how the header names the embedded rules, and
// builtinRulesPath where they are in the source.
const (
	builtinRulesName = "built-in demo rules"
	builtinRulesPath = "cmd/fraudwatch/demo/rules.yaml"
)

// The demo's topology.
const (
	partitions      = 4
	groupID         = "fraudwatch-demo"
	shutdownTimeout = 10 * time.Second
	// clockStep is how often miniredis's clock is moved on: its TTLs only
	// advance through FastForward.
	clockStep = 100 * time.Millisecond
	// catchUp bounds the wait, once traffic stops, for the pipeline to
	// process what was sent and deliver the alerts of its crossings, so
	// that the summary adds up; on a busy machine that takes seconds.
	catchUp       = 15 * time.Second
	progressEvery = 5 * time.Second
)

// Options configure a demo run.
type Options struct {
	// Config, when set, supplies the Slack section and the rules (the
	// built-in demo rules when it has none); Kafka, Redis and metrics are
	// always the demo's own. Nil uses config.Default() and the built-in
	// rules.
	Config *config.Config
	// Out receives the header, the alerts and the summary (default
	// os.Stdout).
	Out io.Writer
	// Color adds ANSI colours by severity.
	Color bool
	// Seed makes the traffic repeatable; 0 picks a random one.
	Seed int64
	// Logger receives the pipeline's logs (default: discarded).
	Logger *slog.Logger
	// Record, when set, receives every message the traffic sends, as JSON
	// lines once Kafka has acknowledged them, and the rules the pipeline
	// ran under as rules lines (backtest.RulesType), the reload's at the
	// point it took effect: input for `fraudwatch backtest`. RecordName
	// names it in the summary.
	Record     io.Writer
	RecordName string
}

// Run runs the demo until ctx ends, then stops the traffic, lets the
// pipeline drain and shut down in order, and prints a summary. It returns
// nil after a clean run.
func Run(ctx context.Context, opts Options) error {
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	seed := uint64(opts.Seed)
	if seed == 0 {
		seed = rand.Uint64()
	}
	out := &output{w: opts.Out, color: opts.Color}
	started := time.Now()

	cfg, rulesFrom, err := buildConfig(opts.Config)
	if err != nil {
		return err
	}
	reload, rec, cleanup, err := setUpRules(opts, &cfg, started)
	defer cleanup()
	if err != nil {
		return err
	}
	w, err := startWorld(&cfg)
	if err != nil {
		return err
	}
	defer w.close()
	notifier, err := notifierFor(&cfg, out, log)
	if err != nil {
		return err
	}
	a, err := app.New(&cfg, app.Options{Logger: log, Notifier: notifier})
	if err != nil {
		return fmt.Errorf("demo: start pipeline: %w", err)
	}
	out.print(header(ctx, &cfg, rulesFrom, w.kafka.ListenAddrs()[0], w.redis.Addr(), a.Addr(), out))

	// The App runs on its own context: it stops only once the traffic has
	// stopped and the pipeline has caught up.
	appCtx, stopApp := context.WithCancel(context.Background())
	defer stopApp()
	appDone := make(chan error, 1)
	go func() { appDone <- a.Run(appCtx) }()

	tr := startTraffic(ctx, seed, &cfg, rec)
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		reload.run(ctx, a, tr, rec, out, started)
	}()
	failure := watch(ctx, tr, appDone, func() {
		out.print(progressLine(time.Since(started), tr.sentSoFar(), gather(a), out))
	})
	<-reloaded
	final, err := tr.stop()
	if err != nil && failure == nil {
		failure = err
	}
	if failure == nil {
		waitCaughtUp(a, final.total())
	}

	stopApp()
	var runErr error
	select {
	case runErr = <-appDone:
	case <-time.After(cfg.ShutdownTimeout + 5*time.Second):
		runErr = errors.New("did not stop within its shutdown timeout")
	}
	elapsed := time.Since(started)
	w.close()

	out.print(summary(elapsed, seed, final, gather(a), &cfg, out))
	if rec != nil {
		out.print(rec.summary(cmp.Or(opts.RecordName, "the recording")))
	}
	if runErr != nil && failure == nil {
		failure = fmt.Errorf("demo: pipeline shutdown: %w", runErr)
	}
	return failure
}

// setUpRules puts the rules into a file of the demo's own, which it
// changes halfway (rules given in code, with no file to copy, are not
// reloaded), and starts the recording, if any, with them. cleanup removes
// the file.
func setUpRules(opts Options, cfg *config.Config, started time.Time) (reload *rulesReload, rec *recorder, cleanup func(), err error) {
	cleanup = func() {}
	cfg.RulesFile = ""
	content, recordFrom := builtinRules, builtinRulesName+", "+builtinRulesPath
	if opts.Config != nil && len(opts.Config.Rules) > 0 {
		content, _ = os.ReadFile(opts.Config.RulesFile)
		recordFrom = opts.Config.RulesFile
	}
	if len(content) > 0 {
		dir, err := os.MkdirTemp("", "fraudwatch-demo-")
		if err != nil {
			return nil, nil, cleanup, fmt.Errorf("demo: %w", err)
		}
		cleanup = func() { os.RemoveAll(dir) }
		if reload, err = prepareReload(dir, content, cfg.Rules); err != nil {
			return nil, nil, cleanup, err
		}
		cfg.RulesFile, reload.recordFrom = reload.path, recordFrom
	}
	if opts.Record != nil {
		rec = &recorder{out: opts.Record}
		// Rules from code cannot be recorded: the summary says so.
		if len(content) > 0 {
			if err := rec.rules(started, recordFrom, content, recordFrom); err != nil {
				return nil, nil, cleanup, fmt.Errorf("demo: %w", err)
			}
		}
	}
	return reload, rec, cleanup, nil
}

// watch waits for the end of the demo: ctx ending (Ctrl-C, --duration),
// the traffic failing, or the pipeline stopping by itself (its metrics
// server failed), which it returns as the failure. Meanwhile it calls
// progress every progressEvery.
func watch(ctx context.Context, tr *traffic, appDone chan error, progress func()) error {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tr.failed:
			return nil // stop reports it
		case err := <-appDone:
			appDone <- err
			return fmt.Errorf("demo: pipeline stopped early: %w", err)
		case <-t.C:
			progress()
		}
	}
}

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
		kfake.SeedTopics(partitions, cfg.Kafka.AlertsTopic))
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
func notifierFor(cfg *config.Config, out *output, log *slog.Logger) (alert.Notifier, error) {
	con := &console{out: out}
	if cfg.Slack.Mode() == config.SlackOff {
		return con, nil
	}
	slack, err := app.NewNotifier(cfg.Slack, log)
	if err != nil {
		return nil, fmt.Errorf("demo: slack: %w", err)
	}
	return &withSlack{console: con, slack: slack, printed: map[string]bool{}}, nil
}

// traffic sends the generator's events to the orders and refunds topics
// until stopped.
type traffic struct {
	w      *kafka.Writer
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

func startTraffic(ctx context.Context, seed uint64, cfg *config.Config, rec *recorder) *traffic {
	tr := &traffic{
		w: &kafka.Writer{
			Addr:         kafka.TCP(cfg.Kafka.Brokers...),
			Balancer:     &kafka.Murmur2Balancer{}, // key = customer_id: a customer's events stay in order
			RequiredAcks: kafka.RequireAll,
			BatchTimeout: 5 * time.Millisecond,
		},
		done:   make(chan error, 1),
		failed: make(chan struct{}),
	}
	ctx, tr.cancel = context.WithCancel(ctx)
	go func() {
		var w messageWriter = tr.w
		if rec != nil {
			rec.w, w = tr.w, rec
		}
		_, err := send(ctx, newGenerator(seed), w, cfg.Kafka.OrdersTopic, cfg.Kafka.RefundsTopic, &tr.turn, func(p produced) {
			tr.mu.Lock()
			tr.sent = p
			tr.mu.Unlock()
		})
		if ctx.Err() == nil {
			close(tr.failed)
		}
		tr.done <- err
	}()
	return tr
}

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
func buildConfig(given *config.Config) (cfg config.Config, rulesFrom string, err error) {
	def := config.Default()
	cfg = def
	if given != nil {
		cfg = *given
	}
	cfg.Kafka = def.Kafka
	cfg.Kafka.GroupID = groupID
	cfg.Kafka.StartOffset = config.StartEarliest
	cfg.Redis = def.Redis
	cfg.Metrics.Listen = "127.0.0.1:0"
	cfg.ShutdownTimeout = shutdownTimeout

	rulesFrom = "from " + cfg.RulesFile
	if len(cfg.Rules) == 0 {
		rs, err := config.ParseRules(builtinRules, builtinRulesPath)
		if err != nil {
			return config.Config{}, "", fmt.Errorf("demo: built-in rules: %w", err)
		}
		cfg.Rules = rs
		rulesFrom = builtinRulesName + ", " + builtinRulesPath
	}
	return cfg, rulesFrom, nil
}

// driveClock moves miniredis's clock along with the real one, so that
// windows and cooldowns end. The returned function stops it; it is
// idempotent.
func driveClock(mr *miniredis.Miniredis) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(clockStep)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
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

// waitCaughtUp waits, for a bounded time, until the pipeline has processed
// as many events as were sent and settled each crossing's alert, and says
// whether it has.
func waitCaughtUp(a *app.App, sent int) bool {
	deadline := time.Now().Add(catchUp)
	for time.Now().Before(deadline) {
		if s := gather(a); s.processed() >= float64(sent) && s.settled() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
