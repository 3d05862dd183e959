package demo

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/rules"
)

// The metrics the summary reads (docs/operations.md, Metrics and health).
const (
	metricConsumed   = "fraudwatch_events_consumed_total"
	metricInvalid    = "fraudwatch_events_invalid_total"
	metricCrossings  = "fraudwatch_threshold_crossings_total"
	metricSent       = "fraudwatch_alerts_sent_total"
	metricSuppressed = "fraudwatch_alerts_suppressed_total"
	metricFailures   = "fraudwatch_alert_failures_total"
	metricClamped    = "fraudwatch_refunds_clamped_total"
	metricElsewhere  = "fraudwatch_alerts_routed_elsewhere_total"
	metricRepeats    = "fraudwatch_alert_repeats_total"
)

// snapshot holds the counters of one Gather: metric name, then its
// series.
type snapshot map[string][]series

// series is one counter's labels and value.
type series struct {
	labels map[string]string
	v      float64
}

// gather reads the App's counters. A failed Gather gives an empty snapshot:
// the demo's report is not worth failing for.
func gather(a *app.App) snapshot {
	s := snapshot{}
	mfs, err := a.Registry().Gather()
	if err != nil {
		return s
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetCounter() == nil {
				continue
			}
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			s[mf.GetName()] = append(s[mf.GetName()], series{labels: labels, v: m.GetCounter().GetValue()})
		}
	}
	return s
}

// sum adds up the series of a metric whose labels hold every name, value
// pair of where; with none, every series.
func (s snapshot) sum(name string, where ...string) int64 {
	var sum float64
	for _, sr := range s[name] {
		ok := true
		for i := 0; i+1 < len(where); i += 2 {
			ok = ok && sr.labels[where[i]] == where[i+1]
		}
		if ok {
			sum += sr.v
		}
	}
	return int64(sum)
}

// by sums a metric's series by the value of one label, matching where.
func (s snapshot) by(name, label string, where ...string) map[string]int64 {
	out := map[string]int64{}
	for _, sr := range s[name] {
		if v, ok := sr.labels[label]; ok {
			out[v] = s.sum(name, append([]string{label, v}, where...)...)
		}
	}
	return out
}

// processed counts events the pipeline is done with, valid or not.
func (s snapshot) processed() float64 {
	return float64(s.sum(metricConsumed) + s.sum(metricInvalid))
}

// settled says whether every crossing's alert was sent, suppressed, given
// up on or routed elsewhere by each receiver (each has a series of sent
// alerts a rule from the start): none is still on its way through the
// alerts topic.
func (s snapshot) settled() bool {
	receivers := map[string]bool{}
	for _, sr := range s[metricSent] {
		receivers[sr.labels["receiver"]] = true
	}
	for r := range receivers {
		done := int64(0)
		for _, m := range []string{metricSent, metricSuppressed, metricFailures, metricElsewhere} {
			done += s.sum(m, "receiver", r)
		}
		if done < s.sum(metricCrossings) {
			return false
		}
	}
	return true
}

// progress rises as the pipeline processes events and settles alerts: a
// catch-up waits while it does.
func (s snapshot) progress() float64 {
	done := s.processed()
	for _, m := range []string{metricSent, metricSuppressed, metricFailures, metricElsewhere} {
		done += float64(s.sum(m))
	}
	return done
}

// header tells a newcomer what is running and what to expect.
func header(ctx context.Context, cfg *config.Config, rulesFrom, kafkaAddr, redisAddr, metricsAddr string, routed bool, out *output) string {
	var b strings.Builder
	k := &cfg.Kafka
	b.WriteString(out.style(ansiBold, "fraudwatch demo") +
		": the pipeline of `fraudwatch run`, on a Kafka and a Redis inside this process\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  kafka\tkfake at %s: topics %s and %s (%d partitions), dead letters to %s, crossings through %s\n",
		kafkaAddr, k.OrdersTopic, k.RefundsTopic, partitions, k.DeadLetterTopic, k.AlertsTopic)
	fmt.Fprintf(tw, "  redis\tminiredis at %s: window counters and cooldowns, kept by Lua scripts\n", redisAddr)
	fmt.Fprintf(tw, "  metrics\thttp://%s/metrics (also /healthz, /readyz)\n", metricsAddr)
	switch cfg.Slack.Mode() {
	case config.SlackWebhook:
		fmt.Fprintf(tw, "  alerts\tprinted below as they fire, and sent to Slack (incoming webhook)\n")
	case config.SlackToken:
		fmt.Fprintf(tw, "  alerts\tprinted below as they fire, and sent to Slack (%s)\n", cfg.Slack.Channel)
	default:
		fmt.Fprintf(tw, "  alerts\tprinted below as they fire (with a slack: section in --config, also to Slack)\n")
	}
	if routed {
		var to []string
		for _, r := range cfg.Rules {
			if slices.Contains(cfg.Routing[r.Name].Receivers, casesName) {
				to = append(to, r.Name)
			}
		}
		fmt.Fprintf(tw, "  %s\ta webhook endpoint the demo runs, which verifies each signature (→ lines); the routes\n", casesName)
		fmt.Fprintf(tw, "\tsend it %s's alerts. The first it gets is acknowledged by %s (✔), and a repeat\n", strings.Join(to, ", "), ackedBy)
		fmt.Fprintf(tw, "\tcrossing within a cooldown is shown in its alert's thread (↳)\n")
	}
	fmt.Fprintf(tw, "  logs\ton stderr; WARN lines about invalid events and clamped refunds are expected:\n")
	fmt.Fprintf(tw, "\tthe traffic includes both on purpose (--log-level info shows every step)\n")
	fmt.Fprintf(tw, "  traffic\t%d-%d orders/s by ordinary shoppers, %s to %s each, mixed with fraud:\n", minRate, maxRate,
		alert.FormatValue(alert.Amount, 5_000, demoCurrency), alert.FormatValue(alert.Count, 150_000, ""))
	fmt.Fprintf(tw, "\torder bursts, big orders on one card, a card that comes back, bots, card testing, a stolen card\n")
	fmt.Fprintf(tw, "\tused once; and legitimate look-alikes that trip rules too: a reseller's bulk orders, a family\n")
	fmt.Fprintf(tw, "\tsharing a card; refunds, malformed events\n")
	fmt.Fprintf(tw, "  outcomes\tto %s, a few seconds after each burst, as a chargeback feed and reviews would:\n", k.OutcomesTopic)
	fmt.Fprintf(tw, "\tfraud for %.0f %% of the fraud, legit or unclear for %.0f %% of the look-alikes\n",
		chargebackShare*100, (reviewLegitShare+reviewUnclearShare)*100)
	if dl, ok := ctx.Deadline(); ok {
		fmt.Fprintf(tw, "  runs\tfor %s (Ctrl-C stops it sooner), then prints a summary\n", time.Until(dl).Round(time.Second))
	} else {
		fmt.Fprintf(tw, "  runs\tuntil Ctrl-C, then prints a summary\n")
	}
	_ = tw.Flush()

	fmt.Fprintf(&b, "\n  rules (%s): an alert fires the first time a group reaches a threshold in a window\n", rulesFrom)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range cfg.Rules {
		fmt.Fprintf(tw, "    %s\t%s\t%s\n", r.Name, strings.ToUpper(string(r.Severity)), describeRule(r))
	}
	_ = tw.Flush()
	b.WriteString("\nWatching. Alerts appear as they fire:\n")
	return b.String()
}

// describeRule says what a rule counts, e.g. "3 orders per customer_id in
// 1m" or "KRW 1,000,000 per card_fingerprint in 10m, cooldown 5m".
func describeRule(r rules.Rule) string {
	var what string
	switch r.Metric {
	case alert.Amount:
		// Thresholds carry no currency; the demo's traffic is in KRW.
		what = alert.FormatValue(r.Metric, r.Threshold, demoCurrency) + " paid"
	case alert.Distinct:
		what = alert.FormatValue(r.Metric, r.Threshold, "") + " distinct " + r.Field
	default:
		what = alert.FormatValue(r.Metric, r.Threshold, "") + " orders"
	}
	window := alert.FormatDuration(r.Window)
	if r.WindowType == alert.Sliding {
		window = "any " + window
	}
	s := fmt.Sprintf("%s per %s in %s", what, strings.Join(r.GroupBy, "+"), window)
	if r.Cooldown != r.Window {
		s += ", cooldown " + alert.FormatDuration(r.Cooldown)
	}
	switch {
	case !r.Enabled:
		s += " (disabled)"
	case r.Mode == alert.ModeShadow:
		s += " (shadow: counted, never alerted)"
	}
	return s
}

// progressLine is printed every few seconds, so that quiet stretches show
// that traffic still flows.
func progressLine(elapsed time.Duration, sent produced, s snapshot, out *output) string {
	line := fmt.Sprintf("  · %s  sent %s · processed %d · %s so far",
		clock(elapsed), sent, int64(s.processed()), plural(s.sum(metricSent, "receiver", consoleName), "alert"))
	return out.style(ansiDim, line) + "\n"
}

func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// summary reports the run from the App's own metrics, as the console's
// receiver counts its alerts, and where else they went.
func summary(elapsed time.Duration, seed uint64, sent produced, s snapshot, cfg *config.Config, went delivered, truth Truth, out *output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s after %s (--seed %d repeats this traffic)\n", out.style(ansiBold, "Summary"),
		elapsed.Round(100*time.Millisecond), int64(seed))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  events sent\t%s\n", sent)
	fmt.Fprintf(tw, "  events consumed\t%s, %s\n",
		plural(s.sum(metricConsumed, "type", string(event.Order)), "order"), plural(s.sum(metricConsumed, "type", string(event.Refund)), "refund"))
	fmt.Fprintf(tw, "  dead-lettered\t%d%s, to %s\n", s.sum(metricInvalid), breakdown(s.by(metricInvalid, "reason")), cfg.Kafka.DeadLetterTopic)
	console := []string{"receiver", consoleName}
	fmt.Fprintf(tw, "  alerts sent\t%d\n", s.sum(metricSent, console...))
	fmt.Fprintf(tw, "  suppressed\t%d shadow, %d cooldown\n",
		s.sum(metricSuppressed, append(console, "reason", dispatch.SuppressedShadow)...),
		s.sum(metricSuppressed, append(console, "reason", dispatch.SuppressedCooldown)...))
	if f := s.sum(metricFailures, console...); f > 0 {
		fmt.Fprintf(tw, "  not delivered\t%d\n", f)
	}
	if n := s.sum(metricClamped); n > 0 {
		fmt.Fprintf(tw, "  refunds clamped\t%d%s: larger than the window's total, which stopped at 0\n",
			n, breakdown(s.by(metricClamped, "rule")))
	} else {
		fmt.Fprintf(tw, "  refunds clamped\t0\n")
	}
	went.report(tw, s)
	planted(tw, truth, sent, cfg.Kafka.OutcomesTopic)
	_ = tw.Flush()

	width := len("rule")
	for _, r := range cfg.Rules {
		width = max(width, len(r.Name))
	}
	fmt.Fprintf(&b, "\n  %-*s  %9s  %7s  %6s  %8s\n", width, "rule", "crossings", "alerted", "shadow", "cooldown")
	for _, r := range cfg.Rules {
		rule := append([]string{"rule", r.Name}, console...)
		fmt.Fprintf(&b, "  %-*s  %9d  %7d  %6d  %8d\n", width, r.Name,
			s.sum(metricCrossings, "rule", r.Name), s.sum(metricSent, rule...),
			s.sum(metricSuppressed, append(rule, "reason", dispatch.SuppressedShadow)...),
			s.sum(metricSuppressed, append(rule, "reason", dispatch.SuppressedCooldown)...))
	}
	b.WriteString("  crossings: first times a group reached the rule's threshold in a window;\n" +
		"  shadow, cooldown: crossings not alerted, because the rule is in shadow mode or the group was alerted recently\n")
	return b.String()
}

// planted says what the traffic planted, as far as it was sent, and the
// outcomes it wrote.
func planted(w io.Writer, t Truth, sent produced, outcomesTopic string) {
	var fraud, lone, lookAlike, fraudOrders, lookAlikeOrders int64
	for _, b := range t.Bursts {
		n := int64(len(b.Orders))
		switch {
		case n == 0:
		case b.Pattern == PatternLoneFraud:
			lone++
		case b.Fraud:
			fraud++
			fraudOrders += n
		default:
			lookAlike++
			lookAlikeOrders += n
		}
	}
	fmt.Fprintf(w, "  planted\t%s (%s), %s no rule can see, and %s that trip\n",
		plural(fraud, "fraud burst"), plural(fraudOrders, "order"), plural(lone, "lone fraud order"), plural(lookAlike, "legitimate look-alike"))
	fmt.Fprintf(w, "\trules as fraud does (%s: a reseller's bulk orders, a family sharing a card)\n", plural(lookAlikeOrders, "order"))
	fmt.Fprintf(w, "  outcomes sent\t%d to %s, one an order: %d fraud (chargebacks), %d legit and %d unclear (manual reviews)\n",
		sent.outcomes(), outcomesTopic, sent.fraud, sent.legit, sent.unclear)
}

// breakdown lists the non-zero counts by label value: " (a 2, b 1)".
func breakdown(counts map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if v := counts[k]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, v))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func plural(n int64, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}
