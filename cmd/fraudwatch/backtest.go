package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/backtest"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/demo"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/rules"
)

// backtestFlags are backtest's flags.
type backtestFlags struct {
	path, input, other, compare, format string
	fromTopic, useLua                   bool
	since                               time.Duration
	// Scoring (docs/outcomes.md).
	outcomes, now, sweep string
	outcomesFromTopic    bool
	maxPerDay            float64
}

// defaultSettings is what a backtest without --config says of its settings.
const defaultSettings = "defaults (no --config)"

func (f *backtestFlags) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("backtest", flag.ContinueOnError)
	fs.StringVar(&f.path, "config", "", "configuration file (YAML): its rules are replayed, under its kafka.max_event_bytes and retry_window; "+
		"optional when --input carries rules (a demo's recording) or --rules is given")
	fs.StringVar(&f.input, "input", "", "JSON-lines events, as produce takes them (- reads stdin)")
	fs.BoolVar(&f.fromTopic, "from-topic", false, "read the configured orders and refunds topics instead of --input, joining no group and committing nothing")
	fs.DurationVar(&f.since, "since", 24*time.Hour, "with --from-topic: how far back to read")
	fs.StringVar(&f.other, "rules", "", "replay this rules file instead of the configuration's, or the rules a demo's recording carries")
	fs.StringVar(&f.compare, "compare", "", "also replay this rules file, and list the alerts the rules add, remove and move against it, and each rule's totals under both")
	fs.StringVar(&f.format, "format", "text", "output: text or json")
	fs.BoolVar(&f.useLua, "lua", false, "run the Lua scripts themselves, in an in-process Redis, rather than their Go model: several times slower (docs/backtest.md, Speed), the same report")
	fs.StringVar(&f.outcomes, "outcomes", "", "score the rules against these outcomes: JSON lines, as the outcomes topic holds them (docs/outcomes.md)")
	fs.BoolVar(&f.outcomesFromTopic, "outcomes-from-topic", false, "score the rules against what the configured outcomes topic holds, joining no group and committing nothing")
	fs.StringVar(&f.now, "now", "", "when the backtest runs, RFC 3339 (default: now): an outcome more than a day after it is refused")
	fs.StringVar(&f.sweep, "sweep", "", "replay one rule at each value of a setting and score each: RULE:threshold=2..10, RULE:threshold=2,4,8, RULE:window=1m..10m/1m")
	fs.Float64Var(&f.maxPerDay, "max-alerts-per-day", -1, "with --sweep: mark the values within this many alerts a day, and name the best recall within it")
	return fs
}

func cmdBacktest(args []string, stdout, stderr io.Writer) int {
	ctx, stop := interruptible()
	defer stop()
	var f backtestFlags
	if code, ok := parse(f.flagSet(), args, stderr); !ok {
		return code
	}
	opts, cfg, ok := f.options(stdout, stderr)
	if !ok {
		return exitUsage
	}
	closeInput, ok := f.openInput(&opts, cfg, stderr)
	if !ok {
		return exitUsage
	}
	if opts.Outcomes, ok = f.outcomesOf(cfg, stderr); !ok {
		closeInput()
		return exitUsage
	}
	defer closeInput()
	if demo.IsTerminal(stderr) {
		opts.Progress = stderr
	}
	if err := backtest.Run(ctx, opts); err != nil {
		if errors.Is(err, backtest.ErrNoRules) {
			fmt.Fprintf(stderr, "fraudwatch backtest: no rules: %s carries none (a demo's recording does); give --config or --rules\n", inputName(f.input))
			return exitUsage
		}
		fmt.Fprintf(stderr, "fraudwatch backtest: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// options checks the flags and makes the backtest's options, but for its
// input, under the configuration's settings, or config.Default's without
// --config (then the rules come from the input or --rules).
func (f *backtestFlags) options(stdout, stderr io.Writer) (backtest.Options, *config.Config, bool) {
	var opts backtest.Options
	switch {
	case f.format != "text" && f.format != "json":
		fmt.Fprintf(stderr, "fraudwatch backtest: --format must be text or json, not %q\n", f.format)
		return opts, nil, false
	case (f.input == "") == !f.fromTopic:
		fmt.Fprintln(stderr, "fraudwatch backtest: give --input or --from-topic, one of them")
		return opts, nil, false
	case f.fromTopic && f.path == "":
		fmt.Fprintln(stderr, "fraudwatch backtest: --from-topic needs --config: its brokers, topics and rules")
		return opts, nil, false
	case f.outcomesFromTopic && f.path == "":
		fmt.Fprintln(stderr, "fraudwatch backtest: --outcomes-from-topic needs --config: its brokers and outcomes topic")
		return opts, nil, false
	}
	if !f.scoring(&opts, stderr) {
		return opts, nil, false
	}
	cfg := config.Default()
	opts.SettingsFrom = defaultSettings
	if f.path != "" {
		loaded, ok := loadConfig("backtest", f.path, stderr)
		if !ok {
			return opts, nil, false
		}
		cfg = *loaded
		opts.Rules, opts.RulesFrom, opts.SettingsFrom = cfg.Rules, cfg.RulesFile, f.path
	}
	opts.InputName, opts.Format, opts.Out = f.input, f.format, stdout
	opts.MaxEventBytes, opts.RetryWindow = cfg.Kafka.MaxEventBytes, cfg.Kafka.RetryWindow
	if f.useLua {
		opts.Engine = backtest.Lua
	}
	if f.other != "" {
		rs, ok := loadRules("--rules", f.other, stderr)
		if !ok {
			return opts, nil, false
		}
		opts.Rules, opts.RulesFrom, opts.RulesOverInput = rs, f.other, true
	}
	if f.compare != "" {
		rs, ok := loadRules("--compare", f.compare, stderr)
		if !ok {
			return opts, nil, false
		}
		opts.Compare, opts.CompareFrom = rs, f.compare
	}
	return opts, &cfg, true
}

// scoring sets opts' --now, --sweep and --max-alerts-per-day.
func (f *backtestFlags) scoring(opts *backtest.Options, stderr io.Writer) bool {
	if f.now != "" {
		now, err := time.Parse(time.RFC3339Nano, f.now)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch backtest: --now %q is not an RFC 3339 time\n", f.now)
			return false
		}
		opts.Now = now
	}
	if f.sweep != "" {
		s, err := backtest.ParseSweep(f.sweep)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch backtest: %v\n", err)
			return false
		}
		opts.Sweep = s
	}
	switch {
	case f.maxPerDay >= 0 && f.sweep == "":
		fmt.Fprintln(stderr, "fraudwatch backtest: --max-alerts-per-day is a sweep's budget: give --sweep")
		return false
	case f.maxPerDay >= 0:
		opts.MaxAlertsPerDay = &f.maxPerDay
	}
	if f.sweep != "" && f.compare != "" {
		fmt.Fprintln(stderr, "fraudwatch backtest: --sweep and --compare do not go together")
		return false
	}
	return true
}

// outcomesOf reads --outcomes FILE's outcomes, then the outcomes topic's
// with --outcomes-from-topic; nil with neither.
func (f *backtestFlags) outcomesOf(cfg *config.Config, stderr io.Writer) (func(context.Context, *backtest.Outcomes) error, bool) {
	if f.outcomes == "" && !f.outcomesFromTopic {
		return nil, true
	}
	var transport kafka.RoundTripper
	if f.outcomesFromTopic {
		var err error
		if transport, err = app.KafkaTransport(cfg.Kafka); err != nil {
			fmt.Fprintf(stderr, "fraudwatch backtest: %v\n", err)
			return nil, false
		}
	}
	return func(ctx context.Context, outs *backtest.Outcomes) error {
		if f.outcomes != "" {
			file, err := os.Open(f.outcomes)
			if err != nil {
				return fmt.Errorf("backtest: --outcomes: %w", err)
			}
			defer file.Close()
			if err := outs.ReadLines(file); err != nil {
				return fmt.Errorf("--outcomes %s: %w", f.outcomes, err)
			}
		}
		if f.outcomesFromTopic {
			return backtest.OutcomesFromTopic(ctx, cfg.Kafka, transport, outs)
		}
		return nil
	}, true
}

// openInput sets the events opts replays: --from-topic's, standard
// input's or a file's, which the returned function closes.
func (f *backtestFlags) openInput(opts *backtest.Options, cfg *config.Config, stderr io.Writer) (func(), bool) {
	switch {
	case f.fromTopic:
		transport, err := app.KafkaTransport(cfg.Kafka)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch backtest: %v\n", err)
			return nil, false
		}
		opts.InputName = fmt.Sprintf("topics %s and %s since %v", cfg.Kafka.OrdersTopic, cfg.Kafka.RefundsTopic, f.since)
		opts.Events = func(ctx context.Context) (*backtest.Events, error) {
			return backtest.FromTopics(ctx, cfg.Kafka, transport, f.since, time.Now())
		}
		return func() {}, true
	case f.input == "-":
		opts.Input = os.Stdin
		return func() {}, true
	}
	file, err := os.Open(f.input)
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch backtest: %v\n", err)
		return nil, false
	}
	opts.Input = file
	return func() { file.Close() }, true
}

// inputName names --input's file in a message.
func inputName(input string) string {
	if input == "-" {
		return "standard input"
	}
	return input
}

// loadRules loads the rules file of a flag, or says why it cannot.
func loadRules(flagName, path string, stderr io.Writer) ([]rules.Rule, bool) {
	rs, err := config.LoadRules(path)
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch backtest: %s %s:\n%v\n", flagName, path, err)
		return nil, false
	}
	return rs, true
}

// matches collects repeated --match F=V flags.
type matches map[string]string

func (m matches) String() string { return fmt.Sprint(map[string]string(m)) }

func (m matches) Set(v string) error {
	f, val, ok := strings.Cut(v, "=")
	if !ok || f == "" || val == "" {
		return fmt.Errorf("%q is not FIELD=VALUE", v)
	}
	if _, dup := m[f]; dup {
		return fmt.Errorf("%s given twice", f)
	}
	m[f] = val
	return nil
}
