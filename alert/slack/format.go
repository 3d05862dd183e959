package slack

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Slack's limits (Block Kit reference), counted in UTF-16 code units
// below, which is never less than Slack's count of characters.
const (
	maxSectionText = 3000
	maxFieldText   = 2000
	maxHeaderText  = 150
)

// Budgets for user-controlled values. They keep one long value (a 10 KB
// shipping address) from pushing the rest of the alert out of the message.
const (
	maxDescription    = 1500
	maxIDText         = 300 // order_id, event_id in a field
	maxGroupSection   = maxSectionText - 100
	maxGroupFieldName = 100
	maxFallbackDesc   = 300
	maxFallbackID     = 128
	maxFallbackGroup  = 1000 // the whole group line of the fallback
	minFallbackValue  = 16
	// An evidence line's order id and value; the fallback's list of
	// order ids.
	maxEvidenceID       = 64
	maxEvidenceValue    = 64
	maxFallbackEvidence = 600
)

var severityEmoji = map[alert.Severity]string{
	alert.SeverityInfo:     ":information_source:",
	alert.SeverityWarning:  ":warning:",
	alert.SeverityHigh:     ":red_circle:",
	alert.SeverityCritical: ":rotating_light:",
}

// Format renders an alert as a Block Kit message and the plain-text fallback
// Slack shows in notifications and clients without blocks. Every value that
// came from an event is escaped for mrkdwn (so "<!channel>" cannot ping
// anyone), rid of control and format characters (so U+202E cannot reverse
// what an analyst reads) and cut to fit Slack's limits.
func Format(a alert.Alert) (fallback string, blocks []slack.Block) {
	emoji, ok := severityEmoji[a.Severity]
	if !ok {
		emoji = ":grey_question:"
	}
	sev := strings.ToUpper(string(a.Severity))
	if sev == "" {
		sev = "UNKNOWN"
	}
	current := alert.FormatValue(a.Metric, a.Current, a.Currency)
	threshold := alert.FormatValue(a.Metric, a.Threshold, a.Currency)
	at := a.At.UTC().Format(time.RFC3339)
	metric := string(a.Metric)
	if metric == "" {
		metric = "value"
	}
	if a.Metric == alert.Distinct && a.Field != "" {
		metric = "distinct " + a.Field
	}
	window := alert.FormatDuration(a.Window)
	if a.WindowType == alert.Sliding {
		window += " sliding"
	}

	// Header: plain_text is never parsed for mentions, so it needs no
	// escaping, only a length cap.
	header := emoji + " " + clipPlain(sev, 20) + " · " + clipPlain(a.Rule, maxHeaderText)
	blocks = append(blocks, slack.NewHeaderBlock(
		slack.NewTextBlockObject(slack.PlainTextType, clipPlain(header, maxHeaderText), true, false)))

	intro := "*Rule* " + clipMrkdwn(a.Rule, 200)
	if a.Description != "" {
		intro += "\n" + clipMrkdwn(a.Description, maxDescription)
	}
	blocks = append(blocks, slack.NewSectionBlock(mrkdwn(intro), nil, nil))

	fields := []*slack.TextBlockObject{
		mrkdwn("*Severity*\n" + emoji + " " + clipMrkdwn(sev, 20)),
		mrkdwn("*Current " + clipMrkdwn(metric, 60) + "*\n" + clipMrkdwn(current, maxFieldText-90)),
		mrkdwn("*Threshold*\n" + clipMrkdwn(threshold, maxFieldText-50)),
		mrkdwn("*Window*\n" + window),
		mrkdwn("*Cooldown*\n" + formatCooldown(a.Cooldown)),
		mrkdwn("*Crossed at*\n" + at),
		mrkdwn("*Order*\n" + clipMrkdwn(orNone(a.OrderID), maxIDText)),
		mrkdwn("*Event*\n" + clipMrkdwn(orNone(a.EventID), maxIDText)),
	}
	blocks = append(blocks, slack.NewSectionBlock(nil, fields, nil))
	blocks = append(blocks, slack.NewSectionBlock(mrkdwn(groupSection(a.GroupBy, a.GroupValues)), nil, nil))
	if len(a.Evidence) > 0 {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(evidenceSection(a)), nil, nil))
	}
	if len(a.Links) > 0 {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(linksSection(a.Links)), nil, nil))
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn(
		"fraudwatch · "+clipMrkdwn(metric, 60)+" rule "+clipMrkdwn(a.Rule, 200)+" · "+at)))

	var fb strings.Builder
	fb.WriteString(emoji + " [" + clipMrkdwn(sev, 20) + "] " + clipMrkdwn(a.Rule, 200))
	if a.Description != "" {
		fb.WriteString(": " + clipMrkdwn(a.Description, maxFallbackDesc))
	}
	fb.WriteString("\n" + groupLine(a.GroupBy, a.GroupValues))
	counted := ""
	if a.Metric == alert.Distinct {
		counted = " " + clipMrkdwn(metric, 60)
	}
	fb.WriteString("\ncurrent " + clipMrkdwn(current, 200) + counted + ", threshold " + clipMrkdwn(threshold, 200) +
		", window " + window + ", cooldown " + formatCooldown(a.Cooldown))
	fb.WriteString("\norder " + clipMrkdwn(orNone(a.OrderID), maxFallbackID) +
		", event " + clipMrkdwn(orNone(a.EventID), maxFallbackID) + ", at " + at)
	if len(a.Evidence) > 0 {
		// Each id is cut here and the list escaped once, as a whole.
		ids := make([]string, len(a.Evidence))
		for i, e := range a.Evidence {
			ids[i] = clipPlain(orNone(e.OrderID), maxEvidenceID)
		}
		fb.WriteString("\nlatest orders: " + clipMrkdwn(strings.Join(ids, ", "), maxFallbackEvidence))
	}
	return fb.String(), blocks
}

// maxLinks bounds the links a message shows.
const maxLinks = 10

// linksSection lists the alert's links as Slack links (<url|text>). The
// URL's | and > would end the link early: they go percent-encoded; the
// text is escaped as any shown text.
func linksSection(links []alert.Link) string {
	var b strings.Builder
	b.WriteString("*Links*")
	for _, l := range links[:min(len(links), maxLinks)] {
		u := strings.NewReplacer("|", "%7C", ">", "%3E", "<", "%3C").Replace(l.URL)
		b.WriteString("\n• <" + clipPlain(u, 1000) + "|" + clipMrkdwn(l.Text, 200) + ">")
	}
	return clipLines(b.String(), maxSectionText)
}

// evidenceSection lists the orders behind the crossing, newest first, and
// for a distinct rule the values they brought.
func evidenceSection(a alert.Alert) string {
	var b strings.Builder
	b.WriteString("*Latest orders* (" + strconv.Itoa(len(a.Evidence)) + ", newest first)")
	var values []string
	seen := map[string]bool{}
	for _, e := range a.Evidence {
		b.WriteString("\n• " + clipMrkdwn(orNone(e.OrderID), maxEvidenceID))
		if a.Metric == alert.Amount || e.Amount != 0 && a.Currency != "" {
			b.WriteString(" · " + clipMrkdwn(alert.FormatValue(alert.Amount, e.Amount, a.Currency), 60))
		}
		if !e.At.IsZero() {
			b.WriteString(" · " + e.At.UTC().Format(time.RFC3339))
		}
		if a.Metric == alert.Distinct && e.Value != "" {
			b.WriteString(" · " + clipMrkdwn(e.Value, maxEvidenceValue))
			if !seen[e.Value] {
				seen[e.Value] = true
				values = append(values, e.Value)
			}
		}
	}
	if len(values) > 0 {
		b.WriteString("\n*Values that counted* (" + strconv.Itoa(len(values)) + ")")
		for _, v := range values {
			b.WriteString("\n• " + clipMrkdwn(v, maxEvidenceValue))
		}
	}
	return clipLines(b.String(), maxSectionText)
}

// mrkdwn builds a verbatim mrkdwn text object: verbatim stops Slack from
// turning bare URLs, #channels and @mentions in user values into links.
func mrkdwn(text string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, text, false, true)
}

// groupSection lists every group_by field with its value. Whole lines are
// dropped (never half an escape sequence) if they would exceed the limit.
func groupSection(fields, values []string) string {
	const head = "*Group*"
	n := max(len(fields), 1)
	perValue := max(64, (maxGroupSection-len(head))/n-maxGroupFieldName)
	var b strings.Builder
	b.WriteString(head)
	width := utf16Len(head)
	for i, f := range fields {
		line := "\n• *" + clipMrkdwn(f, maxGroupFieldName) + "*: " + clipMrkdwn(groupValue(values, i), perValue)
		if w := utf16Len(line); width+w <= maxGroupSection {
			b.WriteString(line)
			width += w
			continue
		}
		b.WriteString("\n… " + strconv.Itoa(len(fields)-i) + " more")
		break
	}
	if len(fields) == 0 {
		b.WriteString("\n(none)")
	}
	return b.String()
}

func groupLine(fields, values []string) string {
	if len(fields) == 0 {
		return "group (none)"
	}
	perValue := max(minFallbackValue, maxFallbackGroup/len(fields)-32)
	parts := make([]string, 0, len(fields))
	for i, f := range fields {
		parts = append(parts, clipMrkdwn(f, 32)+"="+clipMrkdwn(groupValue(values, i), perValue))
	}
	line := "group " + strings.Join(parts, ", ")
	if utf16Len(line) > maxFallbackGroup+64 {
		// Many fields: name them and leave the values to the blocks.
		names := make([]string, 0, len(fields))
		for _, f := range fields {
			names = append(names, clipPlain(f, 32)) // escaped once, below
		}
		line = "group by " + clipMrkdwn(strings.Join(names, ", "), maxFallbackGroup)
	}
	return line
}

func groupValue(values []string, i int) string {
	if i < len(values) {
		return values[i]
	}
	return "(missing)"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func formatCooldown(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return alert.FormatDuration(d)
}

// clipMrkdwn escapes s for Slack mrkdwn and cuts it on a rune boundary so
// that the escaped result, ellipsis included, is at most limit UTF-16
// units. Escaping first and cutting by the escaped width means an entity
// like &lt; is never split and the limit holds after escaping.
func clipMrkdwn(s string, limit int) string { return clip(s, limit, true) }

// clipPlain is clipMrkdwn for plain_text objects, which are not escaped.
func clipPlain(s string, limit int) string { return clip(s, limit, false) }

func clip(s string, limit int, escape bool) string {
	// Control and format characters go first (alert.Printable), then
	// mrkdwn's own: what is left is escaped once.
	s = alert.Printable(s)
	piece := func(r rune) string {
		switch {
		case escape && r == '&':
			return "&amp;"
		case escape && r == '<':
			return "&lt;"
		case escape && r == '>':
			return "&gt;"
		}
		return string(r)
	}
	total := 0
	for _, r := range s {
		total += utf16Len(piece(r))
	}
	fits := total <= limit
	budget := limit
	if !fits {
		budget = limit - 1 // room for the ellipsis
	}
	var b strings.Builder
	w := 0
	for _, r := range s {
		p := piece(r)
		pw := utf16Len(p)
		if w+pw > budget {
			break
		}
		b.WriteString(p)
		w += pw
	}
	if !fits {
		b.WriteString("…")
	}
	return b.String()
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// clipLines cuts text made of escaped lines to at most limit UTF-16 units,
// at a line's end, so that no escape is split.
func clipLines(text string, limit int) string {
	if utf16Len(text) <= limit {
		return text
	}
	cut := 0
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			if utf16Len(text[:i])+2 > limit {
				break
			}
			cut = i
		}
	}
	return text[:cut] + "\n…"
}
