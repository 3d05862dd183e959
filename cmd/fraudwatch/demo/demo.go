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
	"time"

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
	redisTimeout    = 30 * time.Second
	// clockStep is how often miniredis's clock is moved on: its TTLs only
	// advance through FastForward.
	clockStep = 100 * time.Millisecond
	// catchUp bounds the wait, once traffic stops, for the pipeline to
	// process what was sent and deliver the alerts of its crossings, so
	// that the summary adds up: it gives up after catchUp without
	// progress, or catchUpMax in all. A busy machine (a laptop compiling,
	// a CI runner) runs the in-process Kafka and Redis slower than the
	// traffic comes, and a pipeline still working is waited for.
	catchUp    = 30 * time.Second
	catchUpMax = 3 * time.Minute
	// settleMax bounds the wait of a message that must follow what came
	// before it through the pipeline (planned.settle).
	settleMax     = 10 * time.Second
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
	// Truth, when set, is given what the traffic planted and sent, once
	// it has stopped: which orders are fraud and which legitimate
	// look-alikes, the rules each burst trips, and the outcomes written
	// (see Burst).
	Truth func(Truth)
	// Quality, when set, is called with the pipeline once built, and
	// gives the live figures of each rule's alerts judged by their
	// outcomes, which the summary shows (rule quality). Unset, they come
	// from the pipeline's outcome store (App.Outcomes).
	Quality func(*app.App) Qualities
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
	con := &console{out: out}
	notifier, err := notifierFor(&cfg, con, log)
	if err != nil {
		return err
	}
	shown := cfg // the header shows the Slack section that addReceivers clears
	went := delivered{console: con}
	if opts.Config == nil || len(opts.Config.Rules) == 0 {
		// The built-in rules route one rule to a case system.
		if went.cases, err = startCases(&cfg, out); err != nil {
			return err
		}
		defer went.cases.close()
	}
	w, err := startWorld(&cfg)
	if err != nil {
		return err
	}
	defer w.close()
	a, err := app.New(&cfg, app.Options{Logger: log, Notifier: notifier})
	if err != nil {
		return fmt.Errorf("demo: start pipeline: %w", err)
	}
	out.print(header(ctx, &shown, rulesFrom, w.kafka.ListenAddrs()[0], w.redis.Addr(), a.Addr(), went.cases != nil, out))
	ack, err := acknowledge(ctx, &cfg, went.cases, out)
	if err != nil {
		_ = a.Close()
		return err
	}
	defer ack.stop()

	// The App runs on its own context: it stops only once the traffic has
	// stopped and the pipeline has caught up.
	appCtx, stopApp := context.WithCancel(context.Background())
	defer stopApp()
	appDone := make(chan error, 1)
	go func() { appDone <- a.Run(appCtx) }()

	tr := startTraffic(ctx, seed, &cfg, rec, func(ctx context.Context, sent int) bool {
		return processedAll(ctx, a, sent, settleMax)
	})
	reloaded := make(chan struct{})
	if reload != nil {
		reload.caughtUp = func(ctx context.Context, sent int) bool { return caughtUp(ctx, a, sent, catchUpMax) }
	}
	go func() {
		defer close(reloaded)
		reload.run(ctx, a, tr, rec, out, started)
	}()
	failure := watch(ctx, tr, appDone, func() {
		out.print(progressLine(time.Since(started), tr.sentSoFar(), gather(a), out))
	})
	<-reloaded
	final, failure := stopTraffic(tr, a, failure, out)
	ack.stop()
	truth := tr.truth()
	quality := liveQuality(opts, a, &cfg, time.Since(started), final)

	runErr := stopPipeline(stopApp, appDone, cfg.ShutdownTimeout+5*time.Second)
	elapsed := time.Since(started)
	w.close()

	out.print(summary(elapsed, seed, final, gather(a), &cfg, went, truth, out) + quality)
	if opts.Truth != nil {
		opts.Truth(truth)
	}
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

// stopTraffic stops the traffic and, after a run without failure, waits
// until the pipeline has caught up with it. It returns what was sent, and
// the run's failure or the traffic's.
func stopTraffic(tr *traffic, a *app.App, failure error, out *output) (produced, error) {
	final, err := tr.stop()
	if err != nil && failure == nil {
		failure = err
	}
	if failure == nil && !caughtUp(context.Background(), a, final.total(), catchUpMax) {
		out.print(fmt.Sprintf("  ! the pipeline had not caught up with the traffic (no progress for %v, or %v in all): the summary counts what it processed\n", catchUp, catchUpMax))
	}
	return final, failure
}

// stopPipeline stops the App and waits, at most timeout, until it has.
func stopPipeline(stop context.CancelFunc, done chan error, timeout time.Duration) error {
	stop()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return errors.New("did not stop within its shutdown timeout")
	}
}

// liveQuality is the summary's rule quality block, read while the
// pipeline still runs, or "" when there are no live figures to show.
func liveQuality(opts Options, a *app.App, cfg *config.Config, elapsed time.Duration, sent produced) string {
	var q Qualities
	if opts.Quality != nil {
		q = opts.Quality(a)
	} else if store := a.Outcomes(); store != nil {
		q = store
	}
	if q == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), qualityWait)
	defer cancel()
	// A period that holds the whole run.
	qs, err := readQuality(ctx, q, elapsed+time.Minute, sent.fraud)
	return qualityBlock(cfg, qs, err)
}

func notifierFor(cfg *config.Config, con *console, log *slog.Logger) (alert.Notifier, error) {
	if cfg.Slack.Mode() == config.SlackOff {
		return con, nil
	}
	slack, err := app.NewNotifier(cfg.Slack, log)
	if err != nil {
		return nil, fmt.Errorf("demo: slack: %w", err)
	}
	return &withSlack{console: con, slack: slack, printed: map[string]bool{}}, nil
}

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
	// The demo's Redis is miniredis, in this process: its Lua is
	// interpreted in Go, a batch's scripts take many times a real Redis's
	// time, and on a busy machine more than the default 3 s. A timeout
	// there would retry the same batch, no faster, for ever.
	cfg.Redis.ReadTimeout, cfg.Redis.WriteTimeout = redisTimeout, redisTimeout
	cfg.Metrics.Listen = "127.0.0.1:0"
	cfg.ShutdownTimeout = shutdownTimeout

	rulesFrom = "from " + cfg.RulesFile
	if len(cfg.Rules) == 0 {
		set, err := config.ParseRuleSet(builtinRules, builtinRulesPath)
		if err != nil {
			return config.Config{}, "", fmt.Errorf("demo: built-in rules: %w", err)
		}
		cfg.Rules, cfg.EventFields = set.Rules, set.EventFields
		cfg.Routes, cfg.DefaultReceivers, cfg.Routing = set.Routes, set.DefaultReceivers, set.Routing
		rulesFrom = builtinRulesName + ", " + builtinRulesPath
	}
	return cfg, rulesFrom, nil
}
