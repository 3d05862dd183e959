package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/lua"
)

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
	history := fs.Bool("history", false, "list: the history instead (silences ended and expired, and alerts acknowledged "+
		"before acknowledgements were kept with each alert; the last 30 days), the latest first")
	maxArgs := 0
	if sub == "expire" {
		maxArgs = 1 // the silence's id
	}
	ids, code, ok := parseArgs(fs, args, maxArgs, stderr)
	if !ok {
		return code
	}
	var id string
	if len(ids) == 1 {
		id = ids[0]
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
	ctx, stop := interruptible()
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
