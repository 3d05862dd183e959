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
)

func cmdProduce(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (YAML): brokers and topics")
	input := fs.String("input", "", `JSON-lines file of events, or "-" for standard input`)
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if *input == "" {
		fmt.Fprintln(stderr, "fraudwatch produce: --input is required")
		return exitUsage
	}
	cfg, ok := loadConfig("produce", *path, stderr)
	if !ok {
		return exitUsage
	}
	in := io.Reader(os.Stdin)
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch produce: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		in = f
	}
	ctx, stop := interruptible()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	stats, err := app.Produce(ctx, cfg.Kafka, in)
	if err != nil {
		var bad *app.InputError
		if errors.As(err, &bad) {
			fmt.Fprintf(stderr, "fraudwatch produce: %s: %v\n", *input, err)
			return exitUsage
		}
		fmt.Fprintf(stderr, "fraudwatch produce: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "produced %s to %s and %s to %s", plural(stats.Orders, "order"), cfg.Kafka.OrdersTopic,
		plural(stats.Refunds, "refund"), cfg.Kafka.RefundsTopic)
	if stats.Rules > 0 {
		fmt.Fprintf(stdout, "; skipped %s", plural(stats.Rules, "rules line"))
	}
	fmt.Fprintln(stdout)
	return exitOK
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
