// Command fraudwatch is the real-time order fraud monitor. See README.md.
//
//	fraudwatch run --config FILE        consume, evaluate, alert, serve metrics
//	fraudwatch demo [--duration 30s]    the whole pipeline in-process
//	fraudwatch check --config FILE      validate config and rules
//	fraudwatch produce --config FILE --input events.jsonl [--raw --topic TOPIC [--key K]]
//	fraudwatch topics --config FILE [--partitions N] [--replication-factor N] [--dry-run]
//	fraudwatch version
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

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/config"
)

// Set with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = ""
	commit  = ""
)

// Exit codes (README, Running it for real).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(runProcess(os.Args[1:], os.Stdout, os.Stderr))
}

// runProcess is main: what is set once a process, then the command.
// go-redis logs through a package-level logger (its pool's retried dials,
// printed to stderr by default): each command reports its own Redis errors,
// so that logger says nothing unless the command routes it (run: to its
// own logger). Set here, not in run, which tests call in parallel.
func runProcess(args []string, stdout, stderr io.Writer) int {
	redis.SetLogger(quietRedis{})
	return run(args, stdout, stderr)
}

// quietRedis is go-redis's logger for commands that report their own
// errors.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

const usage = `fraudwatch: real-time order fraud monitor

usage:
  fraudwatch run --config FILE        consume events, evaluate rules, alert, serve metrics
  fraudwatch demo [--duration 30s]    the whole pipeline in-process, nothing to install
  fraudwatch check --config FILE      validate the configuration and rules [--diff OLD_RULES]
  fraudwatch backtest [--config FILE] --input events.jsonl
                                      replay recorded events through the rules [--rules F] [--compare F];
                                      --config is optional for a demo's recording, which carries its rules;
                                      [--outcomes F] scores them, [--sweep RULE:threshold=2..10] one rule
  fraudwatch produce --config FILE --input events.jsonl
                                      send JSON-lines events to the configured topics;
                                      [--raw --topic TOPIC [--key K]]: every line as it is, to one
                                      topic, by its role (orders, refunds, dead-letter, alerts, outcomes) or name
  fraudwatch topics --config FILE [--partitions 6] [--replication-factor 3] [--dry-run]
                                      create the configured topics that do not exist yet
  fraudwatch silence add --config FILE --rule R [--match F=V ...] --for 2h --reason TEXT
                                      stop a rule's alerts, or one group's, for a while
  fraudwatch silence list [--history]|expire ID --config FILE
                                      the silences in force, or what they did; end one now
  fraudwatch alert list [--rule R] [--format json] --config FILE
  fraudwatch alert ack|resolve ID [--as WHO] --config FILE
                                      the open alerts; acknowledge or resolve one, as cli:WHO
  fraudwatch label add --outcome fraud|legit|unclear ORDER_ID...|--alert ID --config FILE
  fraudwatch label list [--order ID] [--outcome O] [--format json] --config FILE
                                      say what became of orders (or an alert's), through the outcomes
                                      topic; the outcomes recorded
  fraudwatch version                  version, commit and Go version

Run "fraudwatch COMMAND -h" for the flags of a command. Flags may come before or after
a command's arguments (silence expire ID); "--" ends them.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(args, stderr)
	case "demo":
		return cmdDemo(args, stdout, stderr)
	case "check":
		return cmdCheck(args, stdout, stderr)
	case "produce":
		return cmdProduce(args, stdout, stderr)
	case "topics":
		return cmdTopics(args, stdout, stderr)
	case "backtest":
		return cmdBacktest(args, stdout, stderr)
	case "silence":
		return cmdSilence(args, stdout, stderr)
	case "alert":
		return cmdAlert(args, stdout, stderr)
	case "label":
		return cmdLabel(args, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "fraudwatch: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}

// logFlags are shared by the commands that log.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *flag.FlagSet, level, format string) {
	fs.StringVar(&l.level, "log-level", level, "log level: debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", format, "log format: json or text")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationsAsText}
	switch l.format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not json or text", l.format)
}

// durationsAsText writes a time.Duration as Go prints it ("2s"), in both
// formats: JSON would give nanoseconds (2000000000).
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// loadConfig loads the --config of command name, or says why it cannot.
func loadConfig(name, path string, stderr io.Writer) (*config.Config, bool) {
	if path == "" {
		fmt.Fprintf(stderr, "fraudwatch %s: --config is required\n", name)
		return nil, false
	}
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch %s: invalid configuration:\n%v\n", name, err)
		return nil, false
	}
	return cfg, true
}

// interruptible is a command's context: done at SIGINT or SIGTERM, so
// that a command stops where it is and says so.
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// plural is "1 order", "2 orders".
func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}
