package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/config"
)

// maxLabelOrders bounds the orders one label add names.
const maxLabelOrders = 1000

// labelFlags are label's flags.
type labelFlags struct {
	path, outcome, source, as, alertID, order, format string
	since, wait                                       time.Duration
	limit                                             int
}

// cmdLabel is `fraudwatch label add|list`: outcomes of orders (or of an
// alert, and so of its orders) written to the outcomes topic, as other
// systems write them, and the outcomes recorded.
func cmdLabel(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "add" && args[0] != "list") {
		fmt.Fprintln(stderr, "fraudwatch label: add or list (fraudwatch label add -h)")
		return exitUsage
	}
	sub, args := args[0], args[1:]
	var f labelFlags
	fs := flag.NewFlagSet("label "+sub, flag.ContinueOnError)
	fs.StringVar(&f.path, "config", "", "configuration file (YAML): its Kafka and Redis")
	fs.StringVar(&f.outcome, "outcome", "", "add: fraud, legit or unclear; list: only this outcome")
	fs.StringVar(&f.source, "source", "cli", fmt.Sprintf("add: where the outcome comes from (1 to %d bytes)", outcome.MaxSourceBytes))
	fs.StringVar(&f.as, "as", os.Getenv("USER"), "add: who says so, recorded as cli:<who>")
	fs.StringVar(&f.alertID, "alert", "", "add: label this alert (rule/event_id, as alert list shows it) and every order it lists")
	fs.DurationVar(&f.wait, "wait", 10*time.Second, "add: how long to wait for a replica to record it (0: do not wait)")
	fs.StringVar(&f.order, "order", "", "list: this order's outcome and the alerts that list it")
	fs.DurationVar(&f.since, "since", 30*24*time.Hour, "list: outcomes recorded this long ago at most")
	fs.IntVar(&f.limit, "limit", outcome.DefaultList, fmt.Sprintf("list: at most this many, newest first (1 to %d)", outcome.MaxList))
	fs.StringVar(&f.format, "format", "text", "list: text or json")
	maxArgs := 0
	if sub == "add" {
		maxArgs = maxLabelOrders
	}
	orders, code, ok := parseArgs(fs, args, maxArgs, stderr)
	if !ok {
		return code
	}
	cfg, ok := loadConfig("label", f.path, stderr)
	if !ok {
		return exitUsage
	}
	ctx, stop := interruptible()
	defer stop()
	if sub == "add" {
		return labelAdd(ctx, cfg, f, orders, stdout, stderr)
	}
	return labelList(ctx, cfg, f, stdout, stderr)
}

// labelAdd writes the outcomes, then waits until a replica has recorded
// them.
func labelAdd(ctx context.Context, cfg *config.Config, f labelFlags, orders []string, stdout, stderr io.Writer) int {
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "fraudwatch label add: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case (len(orders) == 0) == (f.alertID == ""):
		return usage("name the orders (fraudwatch label add --outcome fraud ORDER_ID...) or one alert (--alert ID), not both")
	case f.as == "":
		return usage("--as: who says so ($USER is unset)")
	}
	now := time.Now().UTC()
	var outs []outcome.Outcome
	for _, id := range orders {
		outs = append(outs, outcome.Outcome{OrderID: id, Label: alert.Label(f.outcome), Source: f.source, OccurredAt: now, By: "cli:" + f.as})
	}
	if f.alertID != "" {
		outs = append(outs, outcome.Outcome{AlertID: f.alertID, Label: alert.Label(f.outcome), Source: f.source, OccurredAt: now, By: "cli:" + f.as})
	}
	for _, o := range outs {
		if err := o.Validate(now); err != nil {
			return usage("%v", err)
		}
	}
	if f.alertID != "" {
		if code, ok := knownAlert(ctx, cfg, f.alertID, stderr); !ok {
			return code
		}
	}
	if err := app.ProduceOutcomes(ctx, cfg.Kafka, outs); err != nil {
		fmt.Fprintf(stderr, "fraudwatch label add: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "wrote %d outcome(s) to %s\n", len(outs), cfg.Kafka.OutcomesTopic)
	if f.wait <= 0 {
		return exitOK
	}
	return waitRecorded(ctx, cfg, outs, f.wait, stdout, stderr)
}

// knownAlert checks that the store keeps the alert id names, before its
// label is written: a replica would refuse it.
func knownAlert(ctx context.Context, cfg *config.Config, id string, stderr io.Writer) (int, bool) {
	store, done, err := app.OutcomeStore(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch label add: %v\n", err)
		return exitFailure, false
	}
	defer done()
	ok, err := store.KnowsAlert(ctx, id)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "fraudwatch label add: %v\n", err)
		return exitFailure, false
	case !ok:
		fmt.Fprintf(stderr, "fraudwatch label add: no alert %s: fraudwatch keeps the alerts it sent in the last %d days "+
			"(outcomes.retention; ids as fraudwatch alert list and the status page show them)\n", id, int(cfg.Outcomes.Retention.Hours()/24))
		return exitUsage, false
	}
	return exitOK, true
}

// waitRecorded waits until every outcome is recorded (or a later one has
// replaced it), polling the store, and says which are not.
func waitRecorded(ctx context.Context, cfg *config.Config, outs []outcome.Outcome, wait time.Duration, stdout, stderr io.Writer) int {
	store, done, err := app.OutcomeStore(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "fraudwatch label add: written, but cannot see whether it is recorded: %v\n", err)
		return exitFailure
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	pending := outs
	for tick := time.NewTicker(200 * time.Millisecond); ; {
		var left []outcome.Outcome
		for _, o := range pending {
			if ok, err := store.Recorded(ctx, o); err != nil || !ok {
				left = append(left, o)
			}
		}
		if pending = left; len(pending) == 0 {
			fmt.Fprintf(stdout, "recorded: %d outcome(s)\n", len(outs))
			return exitOK
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "fraudwatch label add: %d of %d outcome(s) not recorded within %v: they are on %s, "+
				"and a replica records them when its outcomes group reads them (is fraudwatch running?)\n",
				len(pending), len(outs), wait, cfg.Kafka.OutcomesTopic)
			return exitFailure
		case <-tick.C:
		}
	}
}

// labelList prints recorded outcomes, or one order's.
func labelList(ctx context.Context, cfg *config.Config, f labelFlags, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "fraudwatch label list: %v\n", err)
		if errors.Is(err, outcome.ErrUnknown) {
			return exitUsage
		}
		return exitFailure
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "fraudwatch label list: %s\n", msg)
		return exitUsage
	}
	switch {
	case f.format != "text" && f.format != "json":
		return usage("--format: text or json")
	case f.outcome != "" && !alert.Label(f.outcome).Valid():
		return usage("--outcome: fraud, legit or unclear")
	case f.limit < 1 || f.limit > outcome.MaxList:
		return usage(fmt.Sprintf("--limit: 1 to %d", outcome.MaxList))
	}
	store, done, err := app.OutcomeStore(cfg)
	if err != nil {
		return fail(err)
	}
	defer done()
	var recs []outcome.OrderRecord
	if f.order != "" {
		rec, err := store.Order(ctx, f.order)
		if err != nil {
			return fail(err)
		}
		recs = []outcome.OrderRecord{rec}
	} else if recs, err = store.List(ctx, outcome.ListOptions{Since: time.Now().Add(-f.since), Label: alert.Label(f.outcome), Limit: f.limit}); err != nil {
		return fail(err)
	}
	if f.format == "json" {
		if recs == nil {
			recs = []outcome.OrderRecord{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(recs); err != nil {
			return fail(err)
		}
		return exitOK
	}
	return printRecords(recs, stdout, fail)
}

// printRecords prints outcomes as a table, newest first.
func printRecords(recs []outcome.OrderRecord, stdout io.Writer, fail func(error) int) int {
	if len(recs) == 0 {
		fmt.Fprintln(stdout, "no outcomes")
		return exitOK
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ORDER\tOUTCOME\tSOURCE\tVIA\tBY\tOCCURRED\tRECORDED\tALERTS")
	for _, r := range recs {
		label := string(r.Label)
		if label == "" {
			label = "-" // listed by alerts, no outcome yet
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.OrderID, label, dash(r.Source), dash(string(r.Via)), dash(r.By),
			stamp(r.OccurredAt), stamp(r.RecordedAt), dash(strings.Join(r.Alerts, ",")))
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	return exitOK
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
