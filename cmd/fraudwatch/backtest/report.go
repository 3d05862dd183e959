package backtest

import (
	"cmp"
	"slices"
	"time"

	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Alert is one crossing of the replay and what became of it.
type Alert struct {
	At    time.Time `json:"at"`
	Rule  string    `json:"rule"`
	Group string    `json:"group"`
	Value int64     `json:"value"`
	Order string    `json:"order_id"`
	Event string    `json:"event_id"`
	// Outcome is "sent", or why not: "cooldown" or "shadow".
	Outcome string `json:"outcome"`
	// In a scored replay, an alert sent or a shadow rule's crossing
	// lists orders, its crossing order and its evidence's; and
	// CaughtAfter are the fraud orders counted into its window after it,
	// before the window ended (docs/outcomes.md, Definitions).
	Listed      []string `json:"listed_orders,omitempty"`
	CaughtAfter []string `json:"caught_after,omitempty"`
}

// Rule sums up one rule's crossings.
type Rule struct {
	Name string `json:"name"`
	Counts
	Top []GroupCount `json:"top_groups"`
}

// Counts are a rule's crossings, and what became of them.
type Counts struct {
	Crossings int `json:"crossings"`
	Sent      int `json:"alerts"`
	Cooldown  int `json:"suppressed_cooldown"`
	Shadow    int `json:"suppressed_shadow"`
}

// GroupCount is how often one group crossed one rule.
type GroupCount struct {
	Group     string `json:"group"`
	Crossings int    `json:"crossings"`
}

// Report is what a replay found.
type Report struct {
	Version string    `json:"rules_version"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Rules   []Rule    `json:"rules"`
	Alerts  []Alert   `json:"alerts"`
}

// topGroups is how many groups a rule's summary names.
const topGroups = 3

// summarize counts each rule's crossings by outcome and names the groups
// that crossed it most.
func summarize(rs []rules.Rule, alerts []Alert) []Rule {
	out := make([]Rule, len(rs))
	index := map[string]int{}
	groups := make([]map[string]int, len(rs))
	for i, r := range rs {
		out[i].Name = r.Name
		index[r.Name] = i
		groups[i] = map[string]int{}
	}
	for _, a := range alerts {
		i := index[a.Rule]
		out[i].Crossings++
		groups[i][a.Group]++
		switch a.Outcome {
		case dispatch.OutcomeSent:
			out[i].Sent++
		case dispatch.SuppressedCooldown:
			out[i].Cooldown++
		case dispatch.SuppressedShadow:
			out[i].Shadow++
		}
	}
	for i := range out {
		out[i].Top = []GroupCount{}
		for g, n := range groups[i] {
			out[i].Top = append(out[i].Top, GroupCount{g, n})
		}
		slices.SortFunc(out[i].Top, func(a, b GroupCount) int {
			return cmp.Or(cmp.Compare(b.Crossings, a.Crossings), cmp.Compare(a.Group, b.Group))
		})
		out[i].Top = out[i].Top[:min(len(out[i].Top), topGroups)]
	}
	return out
}
