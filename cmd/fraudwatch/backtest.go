package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/backtest"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/demo"
	"github.com/fraudwatch/fraudwatch/config"
)

func cmdBacktest(args []string, stdout, stderr io.Writer) int {
	ctx, stop := interruptible()
	defer stop()
	fs := flag.NewFlagSet("backtest", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (YAML): its rules are replayed")
	input := fs.String("input", "", "JSON-lines events, as produce takes them (- reads stdin)")
	fromTopic := fs.Bool("from-topic", false, "read the configured orders and refunds topics instead of --input, joining no group and committing nothing")
	since := fs.Duration("since", 24*time.Hour, "with --from-topic: how far back to read")
	other := fs.String("rules", "", "replay this rules file instead of the configuration's, or the rules a demo's recording carries")
	compare := fs.String("compare", "", "also replay this rules file, and list the alerts the rules add, remove and move against it, and each rule's totals under both")
	format := fs.String("format", "text", "output: text or json")
	useLua := fs.Bool("lua", false, "run the Lua scripts themselves, in an in-process Redis, rather than their Go model: several times slower (docs/backtest.md, Speed), the same report")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "fraudwatch backtest: --format must be text or json, not %q\n", *format)
		return exitUsage
	}
	if (*input == "") == !*fromTopic {
		fmt.Fprintln(stderr, "fraudwatch backtest: give --input or --from-topic, one of them")
		return exitUsage
	}
	cfg, ok := loadConfig("backtest", *path, stderr)
	if !ok {
		return exitUsage
	}
	opts := backtest.Options{Rules: cfg.Rules, RulesFrom: cfg.RulesFile, InputName: *input, Format: *format, Out: stdout,
		MaxEventBytes: cfg.Kafka.MaxEventBytes, RetryWindow: cfg.Kafka.RetryWindow}
	if *useLua {
		opts.Engine = backtest.Lua
	}
	if *other != "" {
		rs, err := config.LoadRules(*other)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch backtest: --rules %s:\n%v\n", *other, err)
			return exitUsage
		}
		opts.Rules, opts.RulesFrom, opts.RulesOverInput = rs, *other, true
	}
	if *compare != "" {
		rs, err := config.LoadRules(*compare)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch backtest: --compare %s:\n%v\n", *compare, err)
			return exitUsage
		}
		opts.Compare, opts.CompareFrom = rs, *compare
	}
	switch {
	case *fromTopic:
		transport, err := app.KafkaTransport(cfg.Kafka)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch backtest: %v\n", err)
			return exitUsage
		}
		opts.InputName = fmt.Sprintf("topics %s and %s since %v", cfg.Kafka.OrdersTopic, cfg.Kafka.RefundsTopic, *since)
		opts.Events = func(ctx context.Context) (*backtest.Events, error) {
			return backtest.FromTopics(ctx, cfg.Kafka, transport, *since, time.Now())
		}
	case *input == "-":
		opts.Input = os.Stdin
	default:
		f, err := os.Open(*input)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch backtest: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		opts.Input = f
	}
	if demo.IsTerminal(stderr) {
		opts.Progress = stderr
	}
	if err := backtest.Run(ctx, opts); err != nil {
		fmt.Fprintf(stderr, "fraudwatch backtest: %v\n", err)
		return exitFailure
	}
	return exitOK
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
