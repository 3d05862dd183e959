package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/config"
)

// produceFlags are produce's flags.
type produceFlags struct {
	path, input, topic, key string
	raw                     bool
}

func (f *produceFlags) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	fs.StringVar(&f.path, "config", "", "configuration file (YAML): brokers and topics")
	fs.StringVar(&f.input, "input", "", `JSON-lines file of events, or "-" for standard input`)
	fs.BoolVar(&f.raw, "raw", false, "send every line as it is, whatever it holds, blank lines too, to --topic, rather than events to the topics of their type")
	fs.StringVar(&f.topic, "topic", "", "with --raw: the topic, by its role (orders, refunds, dead-letter, alerts, outcomes) or its configured name")
	fs.StringVar(&f.key, "key", "", "with --raw: every message's key (default none: they are spread over the partitions)")
	return fs
}

func cmdProduce(args []string, stdout, stderr io.Writer) int {
	var f produceFlags
	if code, ok := parse(f.flagSet(), args, stderr); !ok {
		return code
	}
	switch {
	case f.input == "":
		fmt.Fprintln(stderr, "fraudwatch produce: --input is required")
		return exitUsage
	case !f.raw && (f.topic != "" || f.key != ""):
		fmt.Fprintln(stderr, "fraudwatch produce: --topic and --key go with --raw")
		return exitUsage
	case f.raw && f.topic == "":
		fmt.Fprintln(stderr, "fraudwatch produce: --raw needs --topic: orders, refunds, dead-letter, alerts, outcomes or a configured topic's name")
		return exitUsage
	}
	cfg, ok := loadConfig("produce", f.path, stderr)
	if !ok {
		return exitUsage
	}
	send, ok := f.sender(cfg, stdout, stderr)
	if !ok {
		return exitUsage
	}
	in := io.Reader(os.Stdin)
	if f.input != "-" {
		file, err := os.Open(f.input)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch produce: %v\n", err)
			return exitUsage
		}
		defer file.Close()
		in = file
	}
	ctx, stop := interruptible()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := send(ctx, in); err != nil {
		var bad *app.InputError
		if errors.As(err, &bad) {
			fmt.Fprintf(stderr, "fraudwatch produce: %s: %v\n", f.input, err)
			return exitUsage
		}
		fmt.Fprintf(stderr, "fraudwatch produce: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// sender sends the input, events or (--raw) lines, and says what it sent.
func (f *produceFlags) sender(cfg *config.Config, stdout, stderr io.Writer) (func(context.Context, io.Reader) error, bool) {
	if !f.raw {
		return func(ctx context.Context, in io.Reader) error {
			stats, err := app.Produce(ctx, cfg.Kafka, in)
			if err == nil {
				fmt.Fprintf(stdout, "produced %s to %s and %s to %s", plural(stats.Orders, "order"), cfg.Kafka.OrdersTopic,
					plural(stats.Refunds, "refund"), cfg.Kafka.RefundsTopic)
				if stats.Rules > 0 {
					fmt.Fprintf(stdout, "; skipped %s", plural(stats.Rules, "rules line"))
				}
				fmt.Fprintln(stdout)
			}
			return err
		}, true
	}
	topic, err := app.RawTopic(cfg.Kafka, f.topic)
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch produce: %v\n", err)
		return nil, false
	}
	var key []byte
	if f.key != "" {
		key = []byte(f.key)
	}
	return func(ctx context.Context, in io.Reader) error {
		stats, err := app.ProduceRaw(ctx, cfg.Kafka, topic, key, in)
		if err == nil {
			fmt.Fprintf(stdout, "produced %s to %s\n", plural(stats.Lines, "line"), topic)
		}
		return err
	}, true
}

func cmdTopics(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("topics", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (YAML): brokers, TLS, SASL and the topics' names")
	tc := app.TopicsConfig{Out: stdout}
	fs.IntVar(&tc.Partitions, "partitions", app.DefaultPartitions, "partitions of each topic it creates")
	fs.IntVar(&tc.ReplicationFactor, "replication-factor", app.DefaultReplicationFactor,
		"replicas of each partition of the topics it creates; at most the cluster's brokers (1 for a single broker)")
	fs.BoolVar(&tc.DryRun, "dry-run", false, "say what it would create, and create nothing")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if err := tc.Validate(); err != nil {
		fmt.Fprintf(stderr, "fraudwatch topics: %v\n", err)
		return exitUsage
	}
	cfg, ok := loadConfig("topics", *path, stderr)
	if !ok {
		return exitUsage
	}
	ctx, stop := interruptible()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := app.CreateTopics(ctx, cfg.Kafka, tc); err != nil {
		fmt.Fprintf(stderr, "fraudwatch topics: %v\n", err)
		return exitFailure
	}
	return exitOK
}
