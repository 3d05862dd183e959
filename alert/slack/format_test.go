package slack

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

// textObject is one Block Kit text object of a formatted message.
type textObject struct {
	block string // header, section, section.field, context
	typ   string // plain_text, mrkdwn
	text  string
	raw   map[string]any
}

// textObjects walks the JSON Slack would receive, so that the checks see
// exactly what is sent.
func textObjects(t *testing.T, blocks []slack.Block) []textObject {
	t.Helper()
	raw, err := json.Marshal(blocks)
	if err != nil {
		t.Fatalf("marshal blocks: %v", err)
	}
	var decoded []map[string]any
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatalf("unmarshal blocks: %v", err)
	}
	var out []textObject
	add := func(block string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		typ, _ := m["type"].(string)
		text, _ := m["text"].(string)
		out = append(out, textObject{block: block, typ: typ, text: text, raw: m})
	}
	for _, b := range decoded {
		switch b["type"] {
		case "header":
			add("header", b["text"])
		case "section":
			add("section", b["text"])
			fields, _ := b["fields"].([]any)
			if len(fields) > 10 {
				t.Errorf("section has %d fields, Slack allows 10", len(fields))
			}
			for _, f := range fields {
				add("section.field", f)
			}
		case "context":
			elems, _ := b["elements"].([]any)
			for _, e := range elems {
				add("context", e)
			}
		default:
			t.Errorf("unexpected block type %v", b["type"])
		}
	}
	return out
}

func allText(objs []textObject) string {
	var parts []string
	for _, o := range objs {
		parts = append(parts, o.text)
	}
	return strings.Join(parts, "\n")
}

// checkLimits asserts Slack's size limits, counted both in characters and
// in UTF-16 units, and that every mrkdwn object is verbatim.
func checkLimits(t *testing.T, fallback string, objs []textObject) {
	t.Helper()
	limits := map[string]int{"header": 150, "section": 3000, "section.field": 2000, "context": 3000}
	for _, o := range objs {
		limit := limits[o.block]
		if n := len(utf16.Encode([]rune(o.text))); n > limit {
			t.Errorf("%s text is %d UTF-16 units, limit %d", o.block, n, limit)
		}
		if n := utf8.RuneCountInString(o.text); n > limit {
			t.Errorf("%s text is %d characters, limit %d", o.block, n, limit)
		}
		if o.text == "" {
			t.Errorf("%s text is empty; Slack rejects empty text objects", o.block)
		}
		if !utf8.ValidString(o.text) {
			t.Errorf("%s text is not valid UTF-8", o.block)
		}
		if o.typ == "mrkdwn" && o.raw["verbatim"] != true {
			t.Errorf("%s mrkdwn text is not verbatim: %q", o.block, o.text)
		}
	}
	if n := utf8.RuneCountInString(fallback); n > 4000 {
		t.Errorf("fallback is %d characters; want a few thousand at most", n)
	}
	if !utf8.ValidString(fallback) {
		t.Error("fallback is not valid UTF-8")
	}
}

// checkEscaped asserts that mrkdwn text and the fallback carry no raw
// control characters of Slack markup: no < or >, and every & starts an
// entity.
func checkEscaped(t *testing.T, where, s string) {
	t.Helper()
	if strings.ContainsAny(s, "<>") {
		t.Errorf("%s contains a raw < or >: %q", where, s)
	}
	for i := strings.IndexByte(s, '&'); i >= 0; i = next(s, i) {
		rest := s[i:]
		if !strings.HasPrefix(rest, "&amp;") && !strings.HasPrefix(rest, "&lt;") && !strings.HasPrefix(rest, "&gt;") {
			t.Errorf("%s has a bare or cut & at %d: %q", where, i, rest[:min(len(rest), 12)])
		}
	}
}

func next(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '&')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// sampleAlert is testkit.SampleAlert, under the name these tests call it by.
var sampleAlert = testkit.SampleAlert

func TestFormatNamesEverything(t *testing.T) {
	count := sampleAlert()
	count.Rule = "orders-per-customer-1m"
	count.Description = "Three or more orders by one customer within a minute"
	count.Severity = "high"
	count.Metric = "count"
	count.GroupBy = []string{"customer_id"}
	count.GroupValues = []string{"cust-42"}
	count.Current, count.Threshold = 3, 3
	count.Currency = ""
	count.Window = time.Minute
	count.Cooldown = 0
	cards := count
	cards.Rule, cards.Description = "cards-per-customer-1h", ""
	cards.Metric, cards.Field, cards.WindowType = alert.Distinct, "card_fingerprint", alert.Sliding
	cards.Window = time.Hour
	withEvidence := sampleAlert()
	withEvidence.Evidence = []alert.Evidence{
		{OrderID: "ord-77", EventID: "evt-991", Amount: 300_000, At: time.Date(2025, 3, 4, 5, 5, 6, 0, time.UTC)},
		{OrderID: "ord-76", EventID: "evt-990", Amount: 950_000, At: time.Date(2025, 3, 4, 5, 4, 1, 0, time.UTC)},
	}
	cardsWithValues := cards
	cardsWithValues.Evidence = []alert.Evidence{
		{OrderID: "ord-9", EventID: "e9", Value: "card-C"}, {OrderID: "ord-8", EventID: "e8", Value: "card-A"},
		{OrderID: "ord-7", EventID: "e7", Value: "card-B"}, {OrderID: "ord-6", EventID: "e6", Value: "card-A"},
	}

	tests := []struct {
		name string
		a    alert.Alert
		want []string
	}{
		{
			name: "amount rule",
			a:    sampleAlert(),
			want: []string{
				"amount-per-card-10m",
				"More than 1,000,000 won paid by one card within 10 minutes",
				"CRITICAL", ":rotating_light:",
				"card_fingerprint", "fp_9f8e7d", "email", "kim@example.com",
				"KRW 1,250,000", "KRW 1,000,000",
				"10m", "30m",
				"ord-77", "evt-991",
				"2025-03-04T05:05:06Z",
			},
		},
		{
			name: "count rule without cooldown",
			a:    count,
			want: []string{
				"orders-per-customer-1m",
				"Three or more orders by one customer within a minute",
				"HIGH", ":red_circle:",
				"customer_id", "cust-42",
				"current 3", "threshold 3",
				"window 1m", "cooldown none",
				"ord-77", "evt-991",
				"2025-03-04T05:05:06Z",
			},
		},
		{
			name: "sliding distinct rule",
			a:    cards,
			want: []string{"cards-per-customer-1h", "distinct card_fingerprint", "current 3", "window 1h sliding"},
		},
		{
			name: "evidence",
			a:    withEvidence,
			want: []string{"ord-76", "KRW 1,250,000"},
		},
		{
			name: "the values that counted",
			a:    cardsWithValues,
			want: []string{"ord-6", "distinct card_fingerprint"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fallback, blocks := Format(tt.a)
			objs := textObjects(t, blocks)
			text := allText(objs)
			for _, w := range tt.want {
				if !strings.Contains(fallback, w) {
					t.Errorf("fallback lacks %q:\n%s", w, fallback)
				}
				// The blocks lay values out in fields, not in the
				// fallback's "current 3" phrasing.
				bw := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(w,
					"current "), "threshold "), "window "), "cooldown ")
				if !strings.Contains(text, bw) {
					t.Errorf("blocks lack %q:\n%s", bw, text)
				}
			}
			checkLimits(t, fallback, objs)
			for _, o := range objs {
				if o.typ == "mrkdwn" {
					checkEscaped(t, o.block, o.text)
				}
			}
			checkEscaped(t, "fallback", fallback)
		})
	}

	// The blocks list each order with its amount and time, and a distinct
	// rule's values once each; the fallback the orders.
	if fallback, _ := Format(withEvidence); !strings.Contains(fallback, "\nlatest orders: ord-77, ord-76") {
		t.Errorf("fallback lacks the latest orders:\n%s", fallback)
	}
	text := allText(textObjects(t, func() []slack.Block { _, b := Format(withEvidence); return b }()))
	for _, w := range []string{"*Latest orders* (2, newest first)", "• ord-77 · KRW 300,000 · 2025-03-04T05:05:06Z", "• ord-76 · KRW 950,000 · 2025-03-04T05:04:01Z"} {
		if !strings.Contains(text, w) {
			t.Errorf("blocks lack %q:\n%s", w, text)
		}
	}
	text = allText(textObjects(t, func() []slack.Block { _, b := Format(cardsWithValues); return b }()))
	if !strings.Contains(text, "*Values that counted* (3)\n• card-C\n• card-A\n• card-B") || strings.Contains(text, "KRW") {
		t.Errorf("blocks lack the values that counted, once each, without amounts:\n%s", text)
	}
}

func TestFormatSeverity(t *testing.T) {
	for _, sev := range alert.Severities {
		if severityEmoji[sev] == "" {
			t.Errorf("severity %q has no emoji", sev)
		}
	}
	tests := []struct{ severity, emoji, label string }{
		{"info", ":information_source:", "INFO"},
		{"warning", ":warning:", "WARNING"},
		{"high", ":red_circle:", "HIGH"},
		{"critical", ":rotating_light:", "CRITICAL"},
		{"", ":grey_question:", "UNKNOWN"},
	}
	for _, tt := range tests {
		t.Run(tt.label, func(t *testing.T) {
			a := sampleAlert()
			a.Severity = alert.Severity(tt.severity)
			fallback, blocks := Format(a)
			if want := tt.emoji + " [" + tt.label + "]"; !strings.HasPrefix(fallback, want) {
				t.Errorf("fallback starts %q, want prefix %q", fallback[:min(len(fallback), 40)], want)
			}
			header := textObjects(t, blocks)[0]
			if header.block != "header" || !strings.HasPrefix(header.text, tt.emoji+" "+tt.label) {
				t.Errorf("first block = %s %q, want a header starting %q", header.block, header.text, tt.emoji+" "+tt.label)
			}
		})
	}
}

func TestFormatEscapes(t *testing.T) {
	hostile := []string{"<!channel>", "<!here|here>", "<@U012AB3CD>", "<https://evil.example|click me>", "a & b", "&lt;!channel&gt;"}
	for _, v := range hostile {
		t.Run(v, func(t *testing.T) {
			a := sampleAlert()
			a.Description = "desc " + v
			a.GroupValues = []string{v, v}
			a.OrderID = v
			a.EventID = v
			a.Currency = v // an unknown code is printed as given
			fallback, blocks := Format(a)
			objs := textObjects(t, blocks)
			checkEscaped(t, "fallback", fallback)
			for _, o := range objs {
				if o.typ == "mrkdwn" {
					checkEscaped(t, o.block, o.text)
				}
			}
			escaped := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(v)
			if !strings.Contains(fallback, escaped) {
				t.Errorf("fallback lacks the escaped value %q:\n%s", escaped, fallback)
			}
			if !strings.Contains(allText(objs), escaped) {
				t.Errorf("blocks lack the escaped value %q", escaped)
			}
		})
	}
}

// Bidi overrides and other invisible format characters in event values
// would make Slack show something else than the value (U+202E turns
// "cust-1\u202egpj.exe" into "cust-1exe.jpg"); they are dropped, and line
// separators become spaces.
func TestFormatStripsFormatCharacters(t *testing.T) {
	tests := []struct {
		name, value string
		want        string // what is shown instead
	}{
		{"right-to-left override", "cust-1\u202egpj.exe", "cust-1gpj.exe"},
		{"every bidi embedding, override and pop", "a\u202ab\u202bc\u202cd\u202de\u202ef", "abcdef"},
		{"bidi isolates", "a\u2066b\u2067c\u2068d\u2069e", "abcde"},
		{"directional marks", "a\u200eb\u200fc", "abc"},
		{"zero-width characters and a byte order mark", "a\u200bb\u200cc\u200dd\ufeffe\u00adf", "abcdef"},
		{"line and paragraph separators", "a\u2028b\u2029c", "a b c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := sampleAlert()
			a.Description = "desc " + tt.value
			a.GroupValues = []string{tt.value, tt.value}
			a.OrderID = tt.value
			a.EventID = tt.value
			fallback, blocks := Format(a)
			objs := textObjects(t, blocks)
			for where, text := range map[string]string{"fallback": fallback, "blocks": allText(objs)} {
				if i := strings.IndexFunc(text, func(r rune) bool {
					return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
				}); i >= 0 {
					r, _ := utf8.DecodeRuneInString(text[i:])
					t.Errorf("%s holds %U:\n%q", where, r, text)
				}
				if !strings.Contains(text, tt.want) {
					t.Errorf("%s lacks %q:\n%q", where, tt.want, text)
				}
			}
		})
	}
}

func TestFormatTruncatesLongValues(t *testing.T) {
	// 10 KB of a shipping address mixing Hangul (3 bytes in UTF-8), an
	// emoji (2 UTF-16 units) and characters that grow when escaped.
	unit := "서울특별시 강남구 테헤란로 & <1>층 🏠 "
	long := strings.Repeat(unit, 10*1024/len(unit)+1)
	many := make([]string, 40)
	manyValues := make([]string, 40)
	for i := range many {
		many[i] = "field_" + strings.Repeat("x", 200)
		manyValues[i] = long
	}
	tests := []struct {
		name   string
		mutate func(*alert.Alert)
	}{
		{"long group value", func(a *alert.Alert) {
			a.GroupBy = []string{"shipping_address"}
			a.GroupValues = []string{long}
		}},
		{"long value among several", func(a *alert.Alert) {
			a.GroupBy = []string{"email", "shipping_address", "phone"}
			a.GroupValues = []string{"kim@example.com", long, "+82-10-1234-5678"}
		}},
		{"long description and ids", func(a *alert.Alert) {
			a.Description = long
			a.OrderID = long
			a.EventID = long
		}},
		{"forty long fields", func(a *alert.Alert) {
			a.GroupBy = many
			a.GroupValues = manyValues
		}},
		{"long currency code", func(a *alert.Alert) { a.Currency = long }},
		{"twenty long values of evidence", func(a *alert.Alert) {
			a.Metric, a.Field, a.Currency = alert.Distinct, "email", ""
			for i := range 20 {
				a.Evidence = append(a.Evidence, alert.Evidence{OrderID: long[:128] + fmt.Sprint(i), Value: long[:128] + fmt.Sprint(i)})
			}
		}},
		{"twenty long orders of evidence", func(a *alert.Alert) {
			for i := range 20 {
				a.Evidence = append(a.Evidence, alert.Evidence{OrderID: long[:128] + fmt.Sprint(i), Value: long[:128] + fmt.Sprint(i), Amount: 1})
			}
		}},
		{"newlines in values", func(a *alert.Alert) {
			a.GroupValues = []string{"line1\nline2\r\n\tline3", "x"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := sampleAlert()
			tt.mutate(&a)
			fallback, blocks := Format(a)
			objs := textObjects(t, blocks)
			checkLimits(t, fallback, objs)
			checkEscaped(t, "fallback", fallback)
			for _, o := range objs {
				if o.typ == "mrkdwn" {
					checkEscaped(t, o.block, o.text)
				}
				if o.block != "section.field" && strings.Count(o.text, "\n") > 60 {
					t.Errorf("%s has %d lines", o.block, strings.Count(o.text, "\n"))
				}
			}
			// The parts that are not long must survive whatever is cut.
			for _, w := range []string{"amount-per-card-10m", "KRW 1,250,000", "2025-03-04T05:05:06Z"} {
				if a.Currency != "KRW" && strings.HasPrefix(w, "KRW") {
					continue
				}
				if !strings.Contains(fallback, w) || !strings.Contains(allText(objs), w) {
					t.Errorf("%q lost to truncation", w)
				}
			}
		})
	}

	t.Run("long value is cut with an ellipsis", func(t *testing.T) {
		a := sampleAlert()
		a.GroupBy = []string{"shipping_address"}
		a.GroupValues = []string{long}
		fallback, blocks := Format(a)
		head := "서울특별시 강남구 테헤란로 &amp; &lt;1&gt;층 🏠"
		if !strings.Contains(fallback, head) || !strings.Contains(fallback, "…") {
			t.Errorf("fallback lacks the start of the value or the ellipsis:\n%s", fallback)
		}
		if !strings.Contains(allText(textObjects(t, blocks)), head) {
			t.Error("blocks lack the start of the value")
		}
	})

	t.Run("newlines become spaces", func(t *testing.T) {
		a := sampleAlert()
		a.GroupValues = []string{"line1\nline2", "x"}
		fallback, _ := Format(a)
		if !strings.Contains(fallback, "line1 line2") {
			t.Errorf("fallback = %q, want the value on one line", fallback)
		}
	})
}

func TestClip(t *testing.T) {
	tests := []struct {
		s      string
		limit  int
		escape bool
		want   string
	}{
		{"abc", 5, true, "abc"},
		{"abc", 3, true, "abc"},
		{"abcdef", 4, true, "abc…"},
		{"a&b", 7, true, "a&amp;b"},
		{"a&b", 6, true, "a…"}, // never half an entity
		{"<<<", 9, true, "&lt;&lt;…"},
		{"<<<", 9, false, "<<<"},
		{"한국어", 2, true, "한…"},
		{"😀😀", 3, true, "😀…"}, // an emoji is two UTF-16 units
		{"a\nb\tc", 10, true, "a b c"},
		{"a\u202eb\u2028c", 10, true, "ab c"},
		{"\u202e\u202e\u202eabcdef", 4, true, "abc…"}, // dropped characters take no room
		{"", 5, true, ""},
		{"\xff\xfe", 5, true, "\ufffd\ufffd"}, // invalid UTF-8 comes out valid
	}
	for _, tt := range tests {
		if got := clip(tt.s, tt.limit, tt.escape); got != tt.want {
			t.Errorf("clip(%q, %d, %v) = %q, want %q", tt.s, tt.limit, tt.escape, got, tt.want)
		}
	}
}

// A digest counts every alert, names its top groups and lists the first
// ones, one line each with rule and group, escaped as alerts are.
func TestFormatDigest(t *testing.T) {
	var alerts []alert.Alert
	for i := range 13 {
		a := sampleAlert()
		a.Rule = "burst"
		a.GroupBy, a.GroupValues = []string{"customer_id"}, []string{fmt.Sprintf("c%d<!channel>", i%4)}
		a.OrderID = fmt.Sprint("o-", i)
		alerts = append(alerts, a)
	}
	fallback, blocks := FormatDigest(alert.Digest{Rule: "burst", Alerts: alerts, List: 10})
	for _, want := range []string{"[DIGEST] burst: 13 alerts", "• burst customer_id=c0&lt;!channel&gt; ·", "order o-9", "… and 3 more"} {
		if !strings.Contains(fallback, want) {
			t.Errorf("fallback lacks %q:\n%s", want, fallback)
		}
	}
	if strings.Contains(fallback, "order o-10") || strings.Contains(fallback, "&amp;lt;") {
		t.Errorf("fallback lists past 10, or escapes twice:\n%s", fallback)
	}
	// Each line has the alert's value and time too (docs/alerts.md, Floods), the
	// time in UTC.
	first := alerts[0]
	value, at := alert.FormatValue(first.Metric, first.Current, first.Currency), first.At.UTC().Format(time.RFC3339)
	if !strings.Contains(fallback, " · "+value+" · order o-0 · "+at) || !strings.HasSuffix(at, "Z") {
		t.Errorf("a digest line lacks the value %q and the time %q:\n%s", value, at, fallback)
	}
	text := allText(textObjects(t, blocks))
	if !strings.Contains(text, "customer_id=c0&lt;!channel&gt; (4)") || !strings.Contains(text, "*Groups* (4)") {
		t.Errorf("blocks lack the top groups:\n%s", text)
	}
	checkLimits(t, fallback, textObjects(t, blocks))
}

// Evidence is escaped once, in the fallback as in the blocks: "<" shows as
// "&lt;", never "&amp;lt;". So are the field names of a group too long to
// list with its values.
func TestFormatEscapesEvidenceOnce(t *testing.T) {
	a := sampleAlert()
	a.Metric, a.Field = alert.Distinct, "card_fingerprint"
	a.Evidence = []alert.Evidence{{OrderID: "<ord&1>", Value: "<card&A>"}, {OrderID: "ord-2", Value: "&lt;"}}
	fallback, blocks := Format(a)
	text := allText(textObjects(t, blocks))
	for _, tt := range []struct{ where, text, want string }{
		{"fallback", fallback, "latest orders: &lt;ord&amp;1&gt;, ord-2"},
		{"blocks", text, "• &lt;ord&amp;1&gt;"},
		{"blocks", text, "• &lt;card&amp;A&gt;"},
		{"blocks", text, "• &amp;lt;"}, // the value "&lt;" itself, escaped once
	} {
		if !strings.Contains(tt.text, tt.want) {
			t.Errorf("%s lacks %q:\n%s", tt.where, tt.want, tt.text)
		}
	}
	for where, s := range map[string]string{"fallback": fallback, "blocks": text} {
		if strings.Contains(s, "&amp;lt;ord") || strings.Contains(s, "&amp;amp;") || strings.Contains(s, "&amp;lt;card") {
			t.Errorf("%s escapes evidence twice:\n%s", where, s)
		}
	}

	many := sampleAlert()
	many.GroupBy, many.GroupValues = nil, nil
	for i := range 40 {
		many.GroupBy = append(many.GroupBy, fmt.Sprintf("f&%d", i))
		many.GroupValues = append(many.GroupValues, strings.Repeat("v", 100))
	}
	fallback, _ = Format(many)
	if !strings.Contains(fallback, "group by f&amp;0, f&amp;1,") {
		t.Errorf("fallback's group line, names only, escaped once:\n%s", fallback)
	}
}

// An alert's links show as Slack links, their text escaped and their URL
// unable to end the link early (docs/configuration.md, Routes and links).
func TestFormatShowsLinks(t *testing.T) {
	a := testkit.SampleAlert()
	a.Links = []alert.Link{
		{Text: "Order ord-1", URL: "https://bo.example/orders/ord-1"},
		{Text: "<!channel> & co", URL: "https://bo.example/x|evil>y"},
	}
	_, blocks := Format(a)
	text := allText(textObjects(t, blocks))
	for _, want := range []string{"*Links*", "<https://bo.example/orders/ord-1|Order ord-1>",
		"<https://bo.example/x%7Cevil%3Ey|&lt;!channel&gt; &amp; co>"} {
		if !strings.Contains(text, want) {
			t.Errorf("the message lacks %q:\n%s", want, text)
		}
	}
	a.Links = nil
	if _, blocks := Format(a); strings.Contains(allText(textObjects(t, blocks)), "*Links*") {
		t.Error("an alert without links shows a Links section")
	}
}
