package config

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Summary is the one line `fraudwatch check` prints for a valid config.
// It holds no secret. Sliding windows, distinct metrics and where: filters
// add their counts only when there are some, "(3 alert, 1 shadow, 0
// disabled; 1 sliding, 2 distinct, 1 with where)", so a rules file without
// them keeps its line. RuleTable has the rules one by one. For example:
//
//	config.yaml: ok: 4 rules (3 alert, 1 shadow, 0 disabled); kafka 1 broker, topics orders/refunds, dlq fraudwatch.dlq, alerts fraudwatch.alerts; redis 1 address, 16 counting buckets; alerts to slack webhook
func (c *Config) Summary() string {
	var alerting, shadow, disabled, sliding, distinct, filtered int
	for _, r := range c.Rules {
		switch {
		case !r.Enabled:
			disabled++
		case r.Mode == alert.ModeShadow:
			shadow++
		default:
			alerting++
		}
		if r.WindowType == alert.Sliding {
			sliding++
		}
		if r.Metric == alert.Distinct {
			distinct++
		}
		if len(r.Where) > 0 {
			filtered++
		}
	}
	name := c.displayName()
	if name == "" {
		name = "(defaults)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ok: %s (%d alert, %d shadow, %d disabled", name, plural(len(c.Rules), "rule", "rules"), alerting, shadow, disabled)
	if sliding+distinct+filtered > 0 {
		fmt.Fprintf(&b, "; %d sliding, %d distinct, %d with where", sliding, distinct, filtered)
	}
	b.WriteString(")")

	k := &c.Kafka
	fmt.Fprintf(&b, "; kafka %s", plural(len(k.Brokers), "broker", "brokers"))
	var extras []string
	if k.TLS.Enabled {
		extras = append(extras, "tls")
	}
	if k.SASL.Mechanism != "" {
		extras = append(extras, "sasl "+k.SASL.Mechanism)
	}
	if len(extras) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(extras, ", "))
	}
	if k.SameTopic() {
		fmt.Fprintf(&b, ", topic %s for orders and refunds", k.OrdersTopic)
	} else {
		fmt.Fprintf(&b, ", topics %s/%s", k.OrdersTopic, k.RefundsTopic)
	}
	fmt.Fprintf(&b, ", dlq %s, alerts %s", k.DeadLetterTopic, k.AlertsTopic)

	r := &c.Redis
	b.WriteString("; redis ")
	if r.Cluster {
		b.WriteString("cluster ")
	}
	b.WriteString(plural(len(r.Addrs), "address", "addresses"))
	if r.TLS.Enabled {
		b.WriteString(" (tls)")
	}
	// Every replica of a key prefix must count in as many buckets
	// (operations.md, To counting buckets): the line shows the count.
	fmt.Fprintf(&b, ", %d counting buckets", r.CountingBuckets())

	b.WriteString("; alerts to ")
	if c.Receivers != nil {
		b.WriteString(c.receiversSummary())
	} else {
		b.WriteString(slackSummary(&c.Slack))
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// RuleTable lists the rules one a line, under a header, in file order. It
// gives the detail Summary's counts leave out, for an operator checking
// what each rule will see. A where: list longer than a few values shows
// its first ones and how many more there are. It holds no secret: rules
// have none. For example:
//
//	RULE                    STATE  SEVERITY  METRIC                     GROUP BY     WINDOW                    THRESHOLD  COOLDOWN  WHERE
//	orders-per-customer-1m  alert  warning   count                      customer_id  fixed 1m                  3          1m        -
//	cards-per-customer-10m  alert  high      distinct card_fingerprint  customer_id  sliding 10m, lateness 1m  4          10m       currency in KRW|USD; payment_method in card
func (c *Config) RuleTable() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tSTATE\tSEVERITY\tMETRIC\tGROUP BY\tWINDOW\tTHRESHOLD\tCOOLDOWN\tWHERE")
	for i := range c.Rules {
		r := &c.Rules[i]
		state := string(r.Mode)
		if !r.Enabled {
			state = "disabled"
		}
		metric := string(r.Metric)
		if r.Field != "" {
			metric += " " + r.Field
		}
		window := "fixed " + alert.FormatDuration(r.Window)
		if r.WindowType == alert.Sliding {
			window = "sliding " + alert.FormatDuration(r.Window) + ", lateness " + alert.FormatDuration(r.Lateness)
		}
		cooldown := alert.FormatDuration(r.Cooldown)
		if r.Cooldown == 0 {
			cooldown = "off"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Name, state, r.Severity, metric,
			strings.Join(r.GroupBy, ","), window, r.Threshold, cooldown, WhereSummary(r.Where))
	}
	tw.Flush()
	return b.String()
}

// maxShownValues bounds the values a where: summary lists of one test,
// which keeps a long allow list from stretching every line of the table.
const maxShownValues = 4

// WhereSummary renders a where: filter in one cell: "-" for none, else its
// conditions joined by "; ", each as its field and its tests:
// "currency in KRW|USD", "payment_method not gift_card",
// "amount >= 10000 < 5000000". RuleTable and the status page show it.
func WhereSummary(where []rules.Condition) string {
	if len(where) == 0 {
		return "-"
	}
	var conds []string
	for _, c := range where {
		parts := []string{c.Field}
		if c.In != nil {
			parts = append(parts, "in "+valueList(c.In))
		}
		if c.NotIn != nil {
			parts = append(parts, "not "+valueList(c.NotIn))
		}
		for _, bound := range []struct {
			op string
			v  *int64
		}{{">=", c.GTE}, {">", c.GT}, {"<=", c.LTE}, {"<", c.LT}} {
			if bound.v != nil {
				parts = append(parts, bound.op+" "+strconv.FormatInt(*bound.v, 10))
			}
		}
		conds = append(conds, strings.Join(parts, " "))
	}
	return strings.Join(conds, "; ")
}

// valueList joins values with "|", quoting those that hold a separator,
// a space or nothing printable, so that the list reads back unambiguously.
func valueList(vs []string) string {
	shown := vs
	if len(vs) > maxShownValues {
		shown = vs[:maxShownValues-1]
	}
	out := make([]string, 0, len(shown)+1)
	for _, v := range shown {
		if v == "" || strings.ContainsAny(v, "|; \"\t") || !strconv.CanBackquote(v) {
			v = strconv.Quote(v)
		}
		out = append(out, v)
	}
	if len(shown) < len(vs) {
		out = append(out, fmt.Sprintf("(+%d more)", len(vs)-len(shown)))
	}
	return strings.Join(out, "|")
}
