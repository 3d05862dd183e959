package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/demo"
	"github.com/fraudwatch/fraudwatch/config"
)

func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	duration := fs.Duration("duration", 0, "stop by itself after this long (0: run until Ctrl-C)")
	path := fs.String("config", "", "optional configuration: its slack section and rules are used")
	seed := fs.Int64("seed", 0, "traffic generator seed (0: a random one)")
	noColor := fs.Bool("no-color", false, "never colour the output")
	record := fs.String("record", "", "write every event the traffic sends to this file, as JSON lines, with the outcomes it writes and the rules it ran under (input for backtest)")
	var lf logFlags
	// The demo's own lines say what happens; the pipeline's INFO lines
	// would drown them.
	lf.register(fs, "warn", "text")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	log, err := lf.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch demo: %v\n", err)
		return exitUsage
	}
	var cfg *config.Config
	if *path != "" {
		var ok bool
		if cfg, ok = loadConfig("demo", *path, stderr); !ok {
			return exitUsage
		}
	}
	var rec *bufio.Writer
	var recFile *os.File
	if *record != "" {
		if recFile, err = os.Create(*record); err != nil {
			fmt.Fprintf(stderr, "fraudwatch demo: --record: %v\n", err)
			return exitUsage
		}
		defer recFile.Close()
		rec = bufio.NewWriter(recFile)
	}
	signalled, stop := interruptible()
	defer stop()
	// After the first signal the default action is back, as in run: the
	// demo catches up and prints its summary, which takes a while on a
	// busy machine, and a second Ctrl-C ends the process at once.
	context.AfterFunc(signalled, func() {
		if context.Cause(signalled) == context.Canceled {
			return // stop, as the command returns
		}
		stop()
		fmt.Fprintln(stderr, "fraudwatch demo: interrupted: stopping the traffic, catching up and printing the summary; a second Ctrl-C ends it at once")
	})
	ctx := signalled
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	opts := demo.Options{Config: cfg, Out: stdout, Color: !*noColor && demo.IsTerminal(stdout), Seed: *seed, Logger: log,
		RecordName: *record}
	if rec != nil {
		opts.Record = rec
	}
	code := exitOK
	if err := demo.Run(ctx, opts); err != nil {
		fmt.Fprintf(stderr, "fraudwatch demo: %v\n", err)
		code = exitFailure
	}
	// What was recorded is kept, also after a failure.
	if rec != nil {
		if err := errors.Join(rec.Flush(), recFile.Close()); err != nil {
			fmt.Fprintf(stderr, "fraudwatch demo: --record: %v\n", err)
			code = exitFailure
		}
	}
	return code
}
