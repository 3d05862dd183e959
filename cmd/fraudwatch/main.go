// Command fraudwatch is the real-time order fraud monitor. See README.md.
//
//	fraudwatch run --config FILE        consume, evaluate, alert, serve metrics
//	fraudwatch demo [--duration 30s]    the whole pipeline in-process
//	fraudwatch check --config FILE      validate config and rules
//	fraudwatch produce --config FILE --input events.jsonl
//	fraudwatch topics --config FILE [--partitions N] [--replication-factor N] [--dry-run]
//	fraudwatch version
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/backtest"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/demo"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/lua"
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
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `fraudwatch: real-time order fraud monitor

usage:
  fraudwatch run --config FILE        consume events, evaluate rules, alert, serve metrics
  fraudwatch demo [--duration 30s]    the whole pipeline in-process, nothing to install
  fraudwatch check --config FILE      validate the configuration and rules [--diff OLD_RULES]
  fraudwatch backtest --config FILE --input events.jsonl
                                      replay recorded events through the rules [--rules F] [--compare F]
  fraudwatch produce --config FILE --input events.jsonl
                                      send JSON-lines events to the configured topics
  fraudwatch topics --config FILE [--partitions 6] [--replication-factor 3] [--dry-run]
                                      create the configured topics that do not exist yet
  fraudwatch silence add --config FILE --rule R [--match F=V ...] --for 2h --reason TEXT
                                      stop a rule's alerts, or one group's, for a while
  fraudwatch silence list [--history]|expire ID --config FILE
                                      the silences in force, or what they did; end one now
  fraudwatch version                  version, commit and Go version

Run "fraudwatch COMMAND -h" for the flags of a command.
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

// parse parses a command's flags; it returns false (and the exit code)
// when the command should stop.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fraudwatch %s: unexpected arguments: %s\n", fs.Name(), strings.Join(fs.Args(), " "))
		return exitUsage, false
	}
	return 0, true
}

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

func cmdRun(args []string, stderr io.Writer) int {
	// First of all, so that a SIGTERM during start-up is a clean stop too.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (YAML)")
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

func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	duration := fs.Duration("duration", 0, "stop by itself after this long (0: run until Ctrl-C)")
	path := fs.String("config", "", "optional configuration: its slack section and rules are used")
	seed := fs.Int64("seed", 0, "traffic generator seed (0: a random one)")
	noColor := fs.Bool("no-color", false, "never colour the output")
	record := fs.String("record", "", "write every event the traffic sends to this file, as JSON lines, with the rules it ran under (input for backtest)")
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
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

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (YAML)")
	diff := fs.String("diff", "", "a rules file to compare the configuration's rules with: what changing from it does")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	cfg, ok := loadConfig("check", *path, stderr)
	if !ok {
		return exitUsage
	}
	fmt.Fprintln(stdout, cfg.Summary())
	for _, w := range append(cfg.Warnings(), config.DescriptionWarnings(cfg.RulesFile, cfg.Rules)...) {
		fmt.Fprintln(stdout, "warning: "+w)
	}
	fmt.Fprint(stdout, cfg.RuleTable())
	if *diff != "" {
		old, err := config.LoadRules(*diff)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch check: --diff %s:\n%v\n", *diff, err)
			return exitUsage
		}
		fmt.Fprint(stdout, "\n"+config.DiffText(*diff, cfg.RulesFile, old, cfg.Rules))
	}
	return exitOK
}

func cmdBacktest(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("backtest", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (YAML): its rules are replayed")
	input := fs.String("input", "", "JSON-lines events, as produce takes them (- reads stdin)")
	fromTopic := fs.Bool("from-topic", false, "read the configured orders and refunds topics instead of --input, joining no group and committing nothing")
	since := fs.Duration("since", 24*time.Hour, "with --from-topic: how far back to read")
	other := fs.String("rules", "", "replay this rules file instead of the configuration's, or the rules a demo's recording carries")
	compare := fs.String("compare", "", "also replay this rules file, and list the alerts the rules add, remove and move against it, and each rule's totals under both")
	format := fs.String("format", "text", "output: text or json")
	useLua := fs.Bool("lua", false, "run the Lua scripts themselves, in an in-process Redis, rather than their Go model: 14 to 25 times slower here, the same report")
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

func cmdSilence(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "add" && args[0] != "list" && args[0] != "expire") {
		fmt.Fprintln(stderr, "fraudwatch silence: add, list or expire (fraudwatch silence add -h)")
		return exitUsage
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("silence "+sub, flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (YAML): its Redis and rules")
	match := matches{}
	rule := fs.String("rule", "", "add: the rule to silence")
	fs.Var(match, "match", "add: FIELD=VALUE of the group to silence, one for each of the rule's group_by (none: the whole rule)")
	dur := fs.Duration("for", 0, "add: how long the silence lasts")
	reason := fs.String("reason", "", "add: why, for whoever finds it")
	author := fs.String("author", os.Getenv("USER"), "add: who silences; expire: who ends the silence")
	format := fs.String("format", "text", "list: text or json")
	history := fs.Bool("history", false, "list: the history instead (silences ended and expired, alerts acknowledged, "+
		"the last 30 days), the latest first")
	// The id of expire may come before or after the flags.
	var id string
	if sub == "expire" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if sub == "expire" && id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fraudwatch silence %s: unexpected arguments: %s\n", sub, strings.Join(fs.Args(), " "))
		return exitUsage
	}
	if sub == "expire" && id == "" {
		fmt.Fprintln(stderr, "fraudwatch silence expire: which silence? give its ID (fraudwatch silence list)")
		return exitUsage
	}
	if sub == "add" && *rule == "" {
		fmt.Fprintln(stderr, "fraudwatch silence add: --rule is required")
		return exitUsage
	}
	cfg, ok := loadConfig("silence", *path, stderr)
	if !ok {
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rdb, err := app.NewRedis(cfg.Redis)
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch silence: %v\n", err)
		return exitFailure
	}
	defer rdb.Close()
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch silence: %v\n", err)
		return exitFailure
	}
	keys, err := lua.NewKeys(cfg.Redis.KeyPrefix)
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch silence: %v\n", err)
		return exitUsage
	}
	err = silence.Run(ctx, silence.NewStore(rdb, scripts, keys), silence.Command{Name: sub, Rules: app.SilenceRules(cfg.Rules), Rule: *rule,
		Match: match, For: *dur, Reason: *reason, Author: *author, ID: id, History: *history, Format: *format, Out: stdout, Now: time.Now()})
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch silence %s: %v\n", sub, err)
		if errors.Is(err, silence.ErrUsage) {
			return exitUsage
		}
		return exitFailure
	}
	return exitOK
}

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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := app.CreateTopics(ctx, cfg.Kafka, tc); err != nil {
		fmt.Fprintf(stderr, "fraudwatch topics: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func versionString() string {
	info, _ := debug.ReadBuildInfo()
	v, c := buildVersion(version, commit, info)
	return fmt.Sprintf("fraudwatch %s (commit %s, %s %s/%s)", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// buildVersion is the version and commit to report: those -ldflags set (the
// image's build) win; else what the go command stamped into the binary in a
// git checkout (go version -m: the module's pseudo-version, vcs.revision,
// and vcs.modified for uncommitted changes); else dev and unknown.
func buildVersion(ldVersion, ldCommit string, info *debug.BuildInfo) (v, c string) {
	v, c = ldVersion, ldCommit
	if info != nil {
		if v == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		rev, modified := "", false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if c == "" && rev != "" {
			c = rev
			if modified {
				c += "-dirty"
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	if c == "" {
		c = "unknown"
	}
	return v, c
}

// plural is "1 order", "2 orders".
func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}
