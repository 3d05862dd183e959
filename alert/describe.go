package alert

import (
	"math/big"
	"regexp"
	"slices"
	"strings"
)

// Placeholders are what a rule's description may name. An alert renders
// each as it shows the value itself, from the rule in force when it is
// posted, so that a description never contradicts its alert after a
// reload: {threshold} as the threshold ("KRW 700,000", "3"), {window} as
// the window ("10m"), {group_by} as the group's fields ("customer_id").
var Placeholders = []string{"{threshold}", "{window}", "{group_by}"}

// placeholderRE finds what reads as a placeholder: a lower-case name in
// braces. Other braces are text.
var placeholderRE = regexp.MustCompile(`\{[a-z_]+\}`)

// UnknownPlaceholders are the placeholders of a description that no alert
// renders, each once, in order.
func UnknownPlaceholders(desc string) []string {
	var out []string
	for _, p := range placeholderRE.FindAllString(desc, -1) {
		if !slices.Contains(Placeholders, p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Describe renders a rule's description for alert a, whose threshold,
// window, group_by, metric and currency must be set.
func Describe(desc string, a *Alert) string {
	if !strings.Contains(desc, "{") {
		return desc
	}
	return strings.NewReplacer(
		"{threshold}", FormatValue(a.Metric, a.Threshold, a.Currency),
		"{window}", FormatDuration(a.Window),
		"{group_by}", strings.Join(a.GroupBy, ", "),
	).Replace(desc)
}

// literalRE finds numbers written in digits ("3", "1,000,000", "12.50")
// and in words, which a reload leaves as they were.
var literalRE = regexp.MustCompile(`(?i)\b(\d[\d,]*(?:\.\d+)?|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty)\b`)

var numberWords = map[string]string{
	"two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8",
	"nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "fifteen": "15", "twenty": "20",
}

// LiteralThreshold is how a description writes its rule's threshold as a
// number of its own, or "" when it does not: a threshold of minor units
// may be written in major units of a currency with 2 or 3 decimals
// ("USD 500" for 50000). Such a description goes stale when the
// threshold changes, which {threshold} does not.
func LiteralThreshold(desc string, metric Metric, threshold int64) string {
	want := new(big.Rat).SetInt64(threshold)
	for _, lit := range literalRE.FindAllString(desc, -1) {
		digits, ok := numberWords[strings.ToLower(lit)]
		if !ok {
			digits = strings.ReplaceAll(lit, ",", "")
		}
		n, ok := new(big.Rat).SetString(digits)
		if !ok {
			continue
		}
		if n.Cmp(want) == 0 {
			return lit
		}
		for _, scale := range []int64{100, 1000} {
			if metric == Amount && new(big.Rat).Mul(n, big.NewRat(scale, 1)).Cmp(want) == 0 {
				return lit
			}
		}
	}
	return ""
}
