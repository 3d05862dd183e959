// Package app wires fraudwatch together. Tests and the demo start and stop
// an App in-process; cmd/fraudwatch only adds flags and signals. An HTTP
// server exposes metrics and health.
//
// Every process runs the events group and, for each receiver, an alerts
// group of its own feeding that receiver's dispatcher (deliveries.go), as
// drawn below, so that one receiver's outage holds only its own offsets.
// An event's offset is committed once its counters are updated and its
// crossings are in the alerts topic. An alert's offset is committed, in
// each receiver's group, once it is settled for that receiver (sent,
// suppressed, routed elsewhere, refused for good) or kept in Redis
// (parked, or waiting for the receiver's budget).
//
//	orders, refunds ─▶ events group ─▶ rules engine ─▶ Redis scripts
//	                                        │ first crossings (acks=all)
//	                                        ▼
//	                                   alerts topic ─▶ an alerts group per receiver ─▶ its dispatcher ─▶ Slack / webhook / PagerDuty
//	                                                                                        │ opened alerts
//	outcomes topic ─▶ outcomes group ─▶ outcome store (Redis) ◀── Slack's Fraud / Not fraud ◀┘
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Options are what a caller may supply instead of the defaults.
type Options struct {
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// Registry receives every metric; nil makes a new one with the Go and
	// process collectors.
	Registry *prometheus.Registry
	// Notifier stands in for the configured receiver of its name (its
	// routes, links and alerts group kept), beside the others; when no
	// receiver has its name, it replaces them all. The demo uses it to
	// print alerts to the terminal.
	Notifier alert.Notifier
	// Dispatcher tunes alert delivery (tests shorten the backoff).
	Dispatcher dispatch.DispatcherConfig
	// Groups adjusts each of the two groups' settings after they are taken
	// from the configuration (tests shorten heartbeats and commit
	// intervals).
	Groups func(*consumer.GroupConfig)
	// Reload delivers the signals (SIGHUP) on which the rules file is read
	// again; the file is also watched. Nil: on changes of the file only.
	Reload <-chan os.Signal
}

// App is one fraudwatch process.
type App struct {
	cfg *config.Config
	log *slog.Logger
	reg *prometheus.Registry
	rdb redis.UniversalClient
	lua *lua.Scripts
	// buckets keeps the replicas counting in the same buckets.
	buckets *bucketsGuard
	topic   *dispatch.Topic
	eng     *rules.Engine
	events  *consumer.Consumer
	// deliveries are the receivers' dispatchers and alerts groups.
	deliveries []delivery
	// lives changes alerts' lives (Slack's buttons) and counts the open
	// ones.
	lives *life.Store
	// outcomes keeps orders' outcomes; outcomeGroup reads the outcomes
	// topic into it through outcomesIn.
	outcomes     *outcome.Store
	outcomesIn   *outcome.Handler
	outcomeGroup *consumer.Group
	rules        *reloader
	hup          <-chan os.Signal

	receiver string // where alerts go: receiverKind

	listener net.Listener
	server   *http.Server
	ia       *interactions // nil without Slack buttons

	runOnce sync.Once
}

// New builds an App from a validated configuration and opens its metrics
// listener (so Addr is known before Run). Nothing talks to Kafka or Redis
// yet.
func New(cfg *config.Config, opts Options) (*App, error) {
	if cfg == nil {
		return nil, errors.New("app: nil config")
	}
	// Load refuses these already; a Config built in code must not dial or
	// listen on an address with credentials either, as every error and log
	// line about the address (dial, listen, /readyz) would quote them.
	if err := cfg.CheckAddresses(); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	a := &App{cfg: cfg, log: log, reg: reg}
	ok := false
	defer func() {
		if !ok {
			_ = a.Close()
		}
	}()

	if err := a.build(opts); err != nil {
		return nil, err
	}
	var err error
	if a.listener, err = net.Listen("tcp", cfg.Metrics.Listen); err != nil {
		return nil, fmt.Errorf("app: listen on metrics.listen %s: %w", cfg.Metrics.Listen, err)
	}
	if a.server, err = newServer(a); err != nil {
		return nil, err
	}
	if err := a.buildInteractions(); err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// build makes the pipeline's parts, downstream first: Redis and its
// scripts, the alert dispatcher and its group, the alerts topic, the rules
// engine, the events group.
func (a *App) build(opts Options) error {
	cfg, log := a.cfg, a.log
	var err error
	if a.rdb, err = NewRedis(cfg.Redis); err != nil {
		return err
	}
	a.rdb.AddHook(stageHook{})
	if a.lua, err = lua.New(lua.Config{}, a.rdb, a.reg); err != nil {
		return err
	}
	keys, err := lua.NewKeys(cfg.Redis.KeyPrefix)
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	if a.buckets, err = newBucketsGuard(a.rdb, keys.CountingBuckets(), cfg.Redis.CountingBuckets(), log, a.reg); err != nil {
		return err
	}
	events, alerts, err := groupConfigs(cfg)
	if err != nil {
		return err
	}
	if opts.Groups != nil {
		opts.Groups(&events.GroupConfig)
	}
	specs, err := a.receiverSpecs(opts)
	if err != nil {
		return err
	}
	kinds := receiverKinds(specs, opts.Notifier != nil)
	a.receiver = strings.Join(kinds, ",")
	if err := registerReceiver(a.reg, kinds); err != nil {
		return err
	}
	if err := a.buildDeliveries(specs, alerts, opts); err != nil {
		return err
	}
	if a.topic, err = dispatch.NewTopic(dispatch.TopicConfig{
		Brokers:   cfg.Kafka.Brokers,
		Topic:     cfg.Kafka.AlertsTopic,
		Transport: events.Transport(),
	}); err != nil {
		return err
	}
	if a.lives, err = life.New(life.Config{KeyPrefix: cfg.Redis.KeyPrefix, Retention: a.lua.Retention()}, a.lua, a.topic,
		log.With("component", "alert"), a.reg); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	if err := a.buildOutcomes(alerts, opts); err != nil {
		return err
	}
	if a.eng, err = rules.NewEngine(rules.EngineConfig{KeyPrefix: cfg.Redis.KeyPrefix, Buckets: cfg.Redis.CountingBuckets()}, cfg.Rules, a.lua, timedAlerts{a.topic},
		log.With("component", "rules"), a.reg); err != nil {
		return err
	}
	if a.rules, err = newRoutedReloader(cfg.RulesFile, cfg.RuleSet(), cfg.ReceiverList(), a.eng, a.ruleTakers(),
		log.With("component", "rules"), a.reg); err != nil {
		return err
	}
	a.hup = opts.Reload
	if cfg.RulesFile != "" {
		a.rules.arm()
	}
	if a.events, err = consumer.New(events, a.eng, log.With("component", "consumer"), a.reg); err != nil {
		return err
	}
	// Alerts the dispatcher cannot trust or settle go where invalid events
	// go.
	for _, d := range a.deliveries {
		d.disp.SetDeadLetters(a.events)
	}
	a.outcomesIn.SetDeadLetters(a.events)
	// Readiness as Prometheus sees it, for alerting on flapping: what
	// /readyz checks of Kafka, read at each scrape. Redis's trouble shows
	// in fraudwatch_script_errors_total.
	ready := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fraudwatch_ready",
		Help: "1 while both consumer groups hold their assignments (as /readyz checks them), else 0.",
	}, func() float64 {
		if ok, _ := a.alertsReady(); ok && a.events.Ready() {
			return 1
		}
		return 0
	})
	if err := a.reg.Register(ready); err != nil {
		return fmt.Errorf("app: register metrics: %w", err)
	}
	return nil
}

// ruleNames are the names of the rules in force.
func (a *App) ruleNames() []string {
	rs := a.rules.inForce()
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name
	}
	return names
}

// Addr is the metrics listener's address (useful with listen ":0").
func (a *App) Addr() string { return a.listener.Addr().String() }

// Registry holds the App's metrics.
func (a *App) Registry() *prometheus.Registry { return a.reg }

// Run serves until ctx is done, then shuts down in order: both groups stop
// fetching, drain in-flight work and commit; then the clients close and the
// HTTP server stops; the whole shutdown is bounded by shutdown_timeout.
// Run may be called once.
func (a *App) Run(ctx context.Context) error {
	err := errors.New("app: Run called twice")
	a.runOnce.Do(func() { err = a.run(ctx) })
	return err
}

func (a *App) run(parent context.Context) error {
	ctx, stop := context.WithCancelCause(parent)
	defer stop(nil)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := a.server.Serve(a.listener); !errors.Is(err, http.ErrServerClosed) {
			// Without metrics and health the process is blind: shut down
			// as if signalled, and say why.
			stop(fmt.Errorf("app: metrics server: %w", err))
		}
	}()
	a.log.Info("fraudwatch started", "metrics", a.Addr(), "rules", len(a.cfg.Rules),
		"group", a.cfg.Kafka.GroupID, "orders_topic", a.cfg.Kafka.OrdersTopic, "refunds_topic", a.cfg.Kafka.RefundsTopic,
		"alerts_topic", a.cfg.Kafka.AlertsTopic, "alerts_to", a.receiver, "receivers", a.receiverNames())
	if a.receiver == "log" {
		a.log.Warn("alerts go to this process's log only: no Slack webhook or token is set "+
			"(slack.webhook_url, slack.token, or their FRAUDWATCH_SLACK_ environment variables)", "alerts_to", a.receiver)
	}
	if a.ia != nil {
		go a.ia.serve(func(err error) { stop(err) })
		a.log.Info("slack interactions listening", "addr", a.InteractionsAddr())
	}
	for _, w := range a.cfg.Warnings() {
		a.log.Warn("insecure setting", "warning", w)
	}
	warnFields(a.log, a.cfg.FieldWarnings())

	if err := a.checkRedis(ctx); err != nil {
		stop(err)
		return a.shutdown(parent, ctx, served, nil) // nothing starts
	}

	// Each returns once ctx is done and its in-flight work is drained and
	// committed.
	var wg sync.WaitGroup
	var eventsErr, alertsErr, outcomesErr error
	if a.cfg.RulesFile != "" {
		wg.Go(func() { a.rules.watch(ctx, a.hup) })
	}
	wg.Go(func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		checkTopicSettings(cctx, a.cfg.Kafka, a.log)
	})
	if a.ia != nil && a.ia.sweeper != nil {
		wg.Go(func() { a.ia.sweeper.Run(ctx) })
	}
	wg.Go(func() { a.lives.CountOpenEvery(ctx, a.ruleNames) })
	wg.Go(func() { a.buckets.run(ctx) })
	wg.Go(func() { eventsErr = a.events.Run(ctx) })
	wg.Go(func() { alertsErr = a.runDeliveries(ctx) })
	wg.Go(func() { outcomesErr = a.outcomeGroup.Run(ctx) })
	wg.Wait()
	return a.shutdown(parent, ctx, served, []error{eventsErr, alertsErr, outcomesErr})
}

// shutdown ends a run once its parts have returned, errs their errors:
// the interactions listener, the clients, then the metrics server, each
// within its deadline.
func (a *App) shutdown(parent, ctx context.Context, served <-chan struct{}, errs []error) error {
	if parent.Err() == nil {
		errs = append(errs, context.Cause(ctx))
	}
	if a.ia != nil {
		if err := a.ia.stop(parent, 2*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	a.closeClients()
	sctx, cancelServer := context.WithTimeout(context.WithoutCancel(parent), 2*time.Second)
	defer cancelServer()
	if err := a.server.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("app: stop metrics server: %w", err))
	}
	<-served
	a.log.Info("fraudwatch stopped")
	return errors.Join(errs...)
}

// Close releases what New opened, for an App whose Run was never called.
// It is idempotent; after Run it does nothing.
func (a *App) Close() error {
	a.runOnce.Do(func() {
		a.closeClients()
		if a.listener != nil {
			_ = a.listener.Close()
		}
		if a.ia != nil {
			_ = a.ia.listener.Close()
		}
	})
	return nil
}

func (a *App) closeClients() {
	if a.rules != nil {
		a.rules.close()
	}
	if a.events != nil {
		if err := a.events.Close(); err != nil {
			a.log.Warn("closing consumer", "err", err)
		}
	}
	if a.topic != nil {
		if err := a.topic.Close(); err != nil {
			a.log.Warn("closing alerts topic writer", "err", err)
		}
	}
	if a.rdb != nil {
		if err := a.rdb.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			a.log.Warn("closing redis client", "err", err)
		}
	}
}
