package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/redis/go-redis/v9"
)

func cmdRun(args []string, stderr io.Writer) (code int) {
	// First of all, so that a SIGTERM during start-up is a clean stop too.
	ctx, stop := interruptible()
	defer stop()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (YAML)")
	cpuProfile := fs.String("cpuprofile", "", "profile the CPU of the whole run into `FILE`, written at shutdown (go tool pprof)")
	var lf logFlags
	lf.register(fs, "info", "json")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	log, err := lf.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch run: %v\n", err)
		return exitUsage
	}
	cfg, ok := loadConfig("run", *path, stderr)
	if !ok {
		return exitUsage
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch run: --cpuprofile: %v\n", err)
			return exitUsage
		}
		defer func() { code = profiled(code, stop, *cpuProfile, log) }()
	}
	// After the first signal, the default action is back: a second one
	// ends the process at once. Restored first, then logged: once the line
	// is out, it holds.
	context.AfterFunc(ctx, func() {
		// stop, as cmdRun returns, leaves context.Canceled itself; a signal
		// its own error (which also answers errors.Is(Canceled)).
		cause := context.Cause(ctx)
		if cause == context.Canceled {
			return
		}
		stop()
		log.Info("shutting down: draining in-flight work and committing; a second SIGINT or SIGTERM ends the process at once",
			"signal", cause.Error(), "shutdown_timeout", cfg.ShutdownTimeout)
	})
	// go-redis logs through a package-level logger; route it to ours.
	redis.SetLogger(redisLogger{log})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	a, err := app.New(cfg, app.Options{Logger: log, Reload: hup})
	if err != nil {
		log.Error("fraudwatch could not start", "err", err)
		return exitFailure
	}
	// The shutdown is ordered and each step has its own deadline; this is
	// the backstop for a step that ignores its deadline (kafka-go waits out
	// a JoinGroup in progress before it leaves the group).
	backstop(ctx, cfg.ShutdownTimeout, func() {
		log.Error("shutdown took longer than shutdown_timeout; exiting now", "shutdown_timeout", cfg.ShutdownTimeout)
		os.Exit(exitFailure)
	})
	if err := a.Run(ctx); err != nil {
		log.Error("fraudwatch stopped with an error", "err", err)
		return exitFailure
	}
	return exitOK
}

// backstop calls fn when d has passed since ctx ended.
func backstop(ctx context.Context, d time.Duration, fn func()) {
	context.AfterFunc(ctx, func() { time.AfterFunc(d, fn) })
}

// redisLogger adapts slog to go-redis's logging interface.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn("redis client: " + fmt.Sprintf(format, v...))
}
