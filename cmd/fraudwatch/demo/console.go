package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode"

	"github.com/fraudwatch/fraudwatch/alert"
)

// ANSI styles. Only the severity tag and the rule name are coloured, so the
// output stays readable when colours are off.
const (
	ansiReset = "\x1b[0m"
	ansiBold  = "\x1b[1m"
	ansiDim   = "\x1b[2m"
)

var severityStyle = map[alert.Severity]string{
	alert.SeverityInfo:     "\x1b[36m",      // cyan
	alert.SeverityWarning:  "\x1b[33m",      // yellow
	alert.SeverityHigh:     "\x1b[1;31m",    // bold red
	alert.SeverityCritical: "\x1b[1;97;41m", // bold white on red
}

// output serialises writes to the demo's Out: the header and summary come
// from Run, alerts from the dispatcher's goroutine, progress from a ticker.
type output struct {
	mu    sync.Mutex
	w     io.Writer
	color bool
}

func (o *output) print(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = io.WriteString(o.w, s)
}

// style wraps s in an ANSI style when colours are on.
func (o *output) style(code, s string) string {
	if !o.color || code == "" {
		return s
	}
	return code + s + ansiReset
}

// console is the demo's Notifier: it prints each alert as it is
// delivered, the changes of its life (alert.Updater), and the repeat
// crossings of its group in its thread (alert.Threader).
type console struct {
	out *output

	mu      sync.Mutex
	acks    int // acknowledgements shown
	replies int // repeat crossings shown in a thread
}

// consoleName is the console's receiver name, which the demo's routes
// name.
const consoleName = "console"

// Name is the console's receiver name.
func (c *console) Name() string { return consoleName }

// Notify prints one alert. It never fails: the terminal is always there.
// Its receipt names the alert, the thread its repeats are shown in.
func (c *console) Notify(_ context.Context, a alert.Alert) (alert.Receipt, error) {
	c.out.print(c.format(a))
	return alert.Receipt{Channel: consoleName, TS: a.ID}, nil
}

// Update prints the alert's new state under it.
func (c *console) Update(_ context.Context, a alert.Alert, st alert.State, _ alert.Receipt) error {
	var what string
	switch {
	case st.Status == alert.StatusResolved:
		what = "resolved by " + st.ResolvedBy
	case st.Status == alert.StatusAcknowledged:
		what = "acknowledged by " + st.AckedBy
		c.mu.Lock()
		c.acks++
		c.mu.Unlock()
	case st.Assignee != "":
		what = "assigned to " + st.Assignee
	default:
		return nil
	}
	c.out.print(c.out.style(ansiBold, fmt.Sprintf("  ✔ %s: %s %s", clean(what), clean(a.Rule), clean(a.ID))) + "\n")
	return nil
}

// Reply prints a repeat crossing of parent's group as a reply in its
// thread.
func (c *console) Reply(_ context.Context, repeat alert.Alert, parent alert.Receipt) (alert.Receipt, error) {
	c.mu.Lock()
	c.replies++
	c.mu.Unlock()
	value := alert.FormatValue(repeat.Metric, repeat.Current, repeat.Currency)
	if repeat.OrderID != "" {
		value += " · order " + clean(repeat.OrderID)
	}
	c.out.print(fmt.Sprintf("  ↳ again: %s (in the thread of %s)\n", value, clean(parent.TS)))
	return alert.Receipt{Channel: consoleName, TS: repeat.ID}, nil
}

// Note prints text in parent's thread.
func (c *console) Note(_ context.Context, parent alert.Receipt, text string) error {
	c.out.print(fmt.Sprintf("  ↳ %s (in the thread of %s)\n", clean(text), clean(parent.TS)))
	return nil
}

// shown is how many acknowledgements and thread replies it printed.
func (c *console) shown() (acks, replies int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acks, c.replies
}

// format renders an alert as a block of two lines, and a third naming the
// orders before the crossing one when the alert lists them:
//
//	14:03:07  ALERT  HIGH      orders-per-customer-1m: Three or more orders by …
//	          customer_id=cust-482913 · 3 orders within 1m, threshold 3 · order ord-100245
//	          after ord-100244, ord-100243
func (c *console) format(a alert.Alert) string {
	sev := strings.ToUpper(string(a.Severity))
	if sev == "" {
		sev = "UNKNOWN"
	}
	sev = clean(sev)
	tag := c.out.style(severityStyle[a.Severity], " "+sev+" ") + strings.Repeat(" ", max(0, 8-len([]rune(sev))))
	var b strings.Builder
	fmt.Fprintf(&b, "%s  ALERT %s %s", a.At.Local().Format("15:04:05"), tag, c.out.style(ansiBold, clean(a.Rule)))
	if a.Description != "" {
		b.WriteString(": " + clean(a.Description))
	}
	b.WriteString("\n          ")

	groups := make([]string, len(a.GroupBy))
	for i, f := range a.GroupBy {
		v := "(missing)"
		if i < len(a.GroupValues) {
			v = a.GroupValues[i]
		}
		groups[i] = clean(f) + "=" + clean(v)
	}
	b.WriteString(strings.Join(groups, ", "))

	current := alert.FormatValue(a.Metric, a.Current, a.Currency)
	threshold := alert.FormatValue(a.Metric, a.Threshold, a.Currency)
	switch a.Metric {
	case alert.Count:
		current += " orders"
	case alert.Distinct:
		current += " distinct " + clean(a.Field)
	}
	fmt.Fprintf(&b, " · %s within %s, threshold %s", current, alert.FormatDuration(a.Window), threshold)
	if a.OrderID != "" {
		b.WriteString(" · order " + clean(a.OrderID))
	}
	if n := len(a.Evidence); n > 1 {
		ids := make([]string, 0, 5)
		for _, e := range a.Evidence[1:min(n, 6)] {
			ids = append(ids, clean(e.OrderID))
		}
		more := ""
		if n > 6 {
			more = fmt.Sprintf(" and %d more", n-6)
		}
		b.WriteString("\n          after " + strings.Join(ids, ", ") + more)
	}
	b.WriteString("\n")
	return b.String()
}

// clean keeps event values from moving the cursor or changing colours:
// group values come from events, and an event could carry escape codes.
func clean(s string) string {
	const maxLen = 120
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
	if r := []rune(s); len(r) > maxLen {
		s = string(r[:maxLen-1]) + "…"
	}
	return s
}

// withSlack delivers to the console first and then to Slack. The console
// line is printed once even when the dispatcher retries a failed Slack
// delivery, and a Slack failure is shown under it instead of hiding it.
type withSlack struct {
	console *console
	slack   alert.Notifier

	mu      sync.Mutex
	printed map[string]bool // rule and event id of alerts printed but not yet in Slack
}

// Name is the console's: it stands in for the console in routes.
func (n *withSlack) Name() string { return consoleName }

// Notify prints the alert once, then posts it to Slack, whose receipt it
// returns.
func (n *withSlack) Notify(ctx context.Context, a alert.Alert) (alert.Receipt, error) {
	id := a.Rule + "\x00" + a.EventID
	n.mu.Lock()
	first := !n.printed[id]
	n.printed[id] = true
	n.mu.Unlock()
	if first {
		_, _ = n.console.Notify(ctx, a)
	}
	receipt, err := n.slack.Notify(ctx, a)
	if err != nil {
		// The Slack notifier's errors name no secret.
		n.console.out.print(n.console.out.style(ansiDim, fmt.Sprintf("          (Slack delivery failed, the pipeline retries it: %v)", err)) + "\n")
		return alert.Receipt{}, err
	}
	n.mu.Lock()
	delete(n.printed, id)
	n.mu.Unlock()
	return receipt, nil
}

// IsTerminal reports whether w is a terminal (a character device), where
// colours are welcome. Pipes, files and buffers are not.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
