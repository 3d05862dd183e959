package dispatch

import (
	"maps"
	"sync"
	"time"
)

// removedRules are the rules a reload took out of force in the last
// UnknownRuleGrace, with the settings they had. A crossing made just
// before the reload is still delivered under them: otherwise a rule that a
// rules file toggles (or that replicas see removed at different moments)
// has its alerts dropped, or stalls its partition, whenever a retry happens
// to read the rules between two reloads.
type removedRules struct {
	mu   sync.Mutex // SetRules's writers
	gone map[string]removedRule
}

type removedRule struct {
	settings RuleSettings
	at       time.Time
}

// update records the rules of old that next no longer holds, and forgets
// those removed more than grace ago or back in force.
func (r *removedRules) update(old, next map[string]RuleSettings, grace time.Duration, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gone := maps.Clone(r.gone)
	if gone == nil {
		gone = map[string]removedRule{}
	}
	for name, rs := range old {
		if _, ok := next[name]; !ok {
			gone[name] = removedRule{settings: rs, at: now}
		}
	}
	for name, g := range gone {
		if _, back := next[name]; back || now.Sub(g.at) > grace {
			delete(gone, name)
		}
	}
	r.gone = gone
}

// lookup returns the settings of rule name if it left force no more than
// grace ago.
func (r *removedRules) lookup(name string, grace time.Duration, now time.Time) (RuleSettings, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.gone[name]
	if !ok || now.Sub(g.at) > grace {
		return RuleSettings{}, false
	}
	return g.settings, true
}
