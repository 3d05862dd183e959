package backtest

// Difference is what changing the rules does to the alerts sent.
type Difference struct {
	Added   []Alert `json:"added"`
	Removed []Alert `json:"removed"`
}

// Compare lists the alerts sent under new but not old, and under old but
// not new, each in time order. Alerts of one rule and group are paired in
// time order: a group alerted under both, by another event, is no change.
func Compare(old, new *Report) Difference {
	key := func(a Alert) string { return a.Rule + "\x00" + a.Group }
	count := func(r *Report) map[string]int {
		m := map[string]int{}
		for _, a := range r.Alerts {
			if a.Outcome == "sent" {
				m[key(a)]++
			}
		}
		return m
	}
	// unpaired keeps the alerts of r beyond the number the other report
	// has of their rule and group.
	unpaired := func(r *Report, other map[string]int) []Alert {
		out := []Alert{}
		seen := map[string]int{}
		for _, a := range r.Alerts {
			if a.Outcome != "sent" {
				continue
			}
			k := key(a)
			if seen[k]++; seen[k] > other[k] {
				out = append(out, a)
			}
		}
		return out
	}
	return Difference{Added: unpaired(new, count(old)), Removed: unpaired(old, count(new))}
}
