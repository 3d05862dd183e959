package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/lua"
)

// cmdAlert is `fraudwatch alert list|ack|resolve`: the open alerts, and
// their life changed from the command line as a Slack button changes it.
func cmdAlert(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "ack" && args[0] != "resolve") {
		fmt.Fprintln(stderr, "fraudwatch alert: list, ack or resolve (fraudwatch alert list -h)")
		return exitUsage
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("alert "+sub, flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (YAML): its Redis and Kafka")
	rule := fs.String("rule", "", "list: only this rule's alerts")
	format := fs.String("format", "text", "list: text or json")
	limit := fs.Int("limit", 100, fmt.Sprintf("list: at most this many, newest first (1 to %d)", life.MaxList))
	as := fs.String("as", os.Getenv("USER"), "ack, resolve: who acts, shown as cli:<who>")
	maxArgs := 0
	if sub != "list" {
		maxArgs = 1 // the alert's id
	}
	ids, code, ok := parseArgs(fs, args, maxArgs, stderr)
	if !ok {
		return code
	}
	switch {
	case sub != "list" && len(ids) != 1:
		fmt.Fprintf(stderr, "fraudwatch alert %s: which alert? give its ID (fraudwatch alert list)\n", sub)
		return exitUsage
	case sub != "list" && (*as == "" || len(*as) > 200):
		fmt.Fprintf(stderr, "fraudwatch alert %s: --as: who acts, 1 to 200 bytes ($USER is unset)\n", sub)
		return exitUsage
	case *format != "text" && *format != "json":
		fmt.Fprintf(stderr, "fraudwatch alert %s: --format: text or json\n", sub)
		return exitUsage
	}
	cfg, ok := loadConfig("alert", *path, stderr)
	if !ok {
		return exitUsage
	}
	ctx, stop := interruptible()
	defer stop()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "fraudwatch alert %s: %v\n", sub, err)
		if errors.Is(err, life.ErrUnknown) {
			return exitUsage
		}
		return exitFailure
	}
	store, done, err := alertStore(cfg, sub != "list")
	if err != nil {
		return fail(err)
	}
	defer done()
	if sub == "list" {
		return listAlerts(ctx, store, *rule, *format, *limit, stdout, fail)
	}
	op := alert.OpAcknowledge
	if sub == "resolve" {
		op = alert.OpResolve
	}
	ref, err := store.ByID(ctx, ids[0])
	if err != nil {
		return fail(err)
	}
	st, err := store.Change(ctx, ref, op, "cli:"+*as)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "%s: %s%s\n", ids[0], st.Status, stateText(st))
	return exitOK
}

// alertStore is the store the command reads and changes alerts' lives
// with: on the configuration's Redis, and, when it changes them, saying
// each change on its alerts topic. done closes what it opened.
func alertStore(cfg *config.Config, changes bool) (*life.Store, func(), error) {
	rdb, err := app.NewRedis(cfg.Redis)
	if err != nil {
		return nil, nil, err
	}
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	closers := []func() error{rdb.Close}
	done := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	var pub life.Publisher
	if changes {
		tr, err := app.KafkaTransport(cfg.Kafka)
		if err != nil {
			done()
			return nil, nil, err
		}
		topic, err := dispatch.NewTopic(dispatch.TopicConfig{Brokers: cfg.Kafka.Brokers, Topic: cfg.Kafka.AlertsTopic, Transport: tr})
		if err != nil {
			done()
			return nil, nil, err
		}
		closers = append(closers, topic.Close)
		pub = topic
	}
	store, err := life.New(life.Config{KeyPrefix: cfg.Redis.KeyPrefix}, scripts, pub, nil, nil)
	if err != nil {
		done()
		return nil, nil, err
	}
	return store, done, nil
}

// listed is one open alert as `alert list --format json` prints it: no
// group values (personal data), as the status page.
type listed struct {
	ID          string         `json:"id"`
	Rule        string         `json:"rule"`
	Severity    alert.Severity `json:"severity,omitempty"`
	OrderID     string         `json:"order_id,omitempty"`
	Description string         `json:"description,omitempty"`
	alert.State
}

func listAlerts(ctx context.Context, store *life.Store, rule, format string, limit int, stdout io.Writer, fail func(error) int) int {
	entries, err := store.List(ctx, limit)
	if err != nil {
		return fail(err)
	}
	var out []listed
	for _, e := range entries {
		if rule != "" && e.Ref.Rule != rule {
			continue
		}
		out = append(out, listed{ID: e.ID, Rule: e.Ref.Rule, Severity: e.Alert.Severity, OrderID: e.Alert.OrderID,
			Description: e.Alert.Description, State: e.State})
	}
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if out == nil {
			out = []listed{}
		}
		if err := enc.Encode(out); err != nil {
			return fail(err)
		}
		return exitOK
	}
	if len(out) == 0 {
		fmt.Fprintln(stdout, "no open alerts")
		return exitOK
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSEVERITY\tSTATUS\tOPENED\tACKNOWLEDGED BY\tASSIGNEE")
	for _, l := range out {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", l.ID, l.Severity, l.Status, l.OpenedAt.UTC().Format(time.RFC3339), l.AckedBy, l.Assignee)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	return exitOK
}

// stateText says who did what to an alert, when.
func stateText(st alert.State) string {
	var s string
	if st.AckedBy != "" {
		s += fmt.Sprintf(", acknowledged by %s at %s", st.AckedBy, st.AckedAt.UTC().Format(time.RFC3339))
	}
	if st.ResolvedBy != "" {
		s += fmt.Sprintf(", resolved by %s at %s", st.ResolvedBy, st.ResolvedAt.UTC().Format(time.RFC3339))
	}
	return s
}
