package backtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/rules"
)

// RulesType is the "type" of a line that carries rules rather than an
// event. `fraudwatch demo --record` writes one when it starts and one at
// each rules reload. So a backtest of the recording runs under the rules
// the demo ran under, each from the point it took effect.
const RulesType = "rules"

// RuleSet is a set of rules in force from At: for the events whose time is
// At or later, until the next set's At.
type RuleSet struct {
	At time.Time
	// From says where the rules came from, e.g. "built-in demo rules".
	From  string
	Rules []rules.Rule
}

// rulesLine is a rules line as it is written: the rules file's text, as
// `fraudwatch check` and the consumer's rules_file take it.
type rulesLine struct {
	Type  string `json:"type"`
	At    string `json:"at"`
	From  string `json:"from"`
	Rules string `json:"rules"`
}

// RulesLine is the line (without its newline) that records a rules file's
// text, content, in force from at.
func RulesLine(at time.Time, from string, content []byte) ([]byte, error) {
	b, err := json.Marshal(rulesLine{Type: RulesType, At: atText(at), From: from, Rules: string(content)})
	if err != nil {
		return nil, fmt.Errorf("backtest: encode a rules line: %w", err)
	}
	return b, nil
}

// IsRulesLine says whether a line is a rules line: a JSON object whose
// "type" is "rules". Event lines are told apart cheaply, without decoding.
func IsRulesLine(line []byte) bool {
	if !bytes.Contains(line, []byte(`"`+RulesType+`"`)) {
		return false
	}
	var head struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(line, &head) == nil && head.Type == RulesType
}

// parseRulesLine decodes and checks a rules line; name says where it is,
// for the rules' errors.
func parseRulesLine(line []byte, name string) (RuleSet, error) {
	var l rulesLine
	if err := json.Unmarshal(line, &l); err != nil {
		return RuleSet{}, fmt.Errorf("%s: %w", name, err)
	}
	at, err := time.Parse(time.RFC3339Nano, l.At)
	if err != nil {
		return RuleSet{}, fmt.Errorf(`%s: "at" is not an RFC 3339 time: %w`, name, err)
	}
	rs, err := config.ParseRules([]byte(l.Rules), name)
	if err != nil {
		return RuleSet{}, err
	}
	if len(rs) == 0 {
		return RuleSet{}, fmt.Errorf("%s: no rules", name)
	}
	// From is shown on a terminal: it must not be able to rewrite it.
	return RuleSet{At: at, From: alert.Printable(l.From), Rules: rs}, nil
}

// ReplaySets is Replay under rules that change: each set from its At (the
// first from the start), the windows, marks and cooldowns of a rule kept
// across the change, as a reload keeps them. The sets' times must
// increase.
func ReplaySets(ctx context.Context, sets []RuleSet, evs *Events, engine Engine, progress func(done int)) (*Report, error) {
	return replaySets(ctx, sets, evs, replayConfig{engine: engine, progress: progress, parallel: runtime.GOMAXPROCS(0)})
}

// replaySets is ReplaySets as c says.
func replaySets(ctx context.Context, sets []RuleSet, evs *Events, c replayConfig) (*Report, error) {
	if len(sets) == 0 {
		return nil, errors.New("backtest: no rules")
	}
	for i := 1; i < len(sets); i++ {
		if !sets[i].At.After(sets[i-1].At) {
			return nil, fmt.Errorf("backtest: rule set %d is in force from %s, not after the one before it", i+1, atText(sets[i].At))
		}
	}
	return replay(ctx, sets, evs, c)
}

// allRules is every rule of the sets, by name, in the order they first
// appear, each as its latest set has it.
func allRules(sets []RuleSet) []rules.Rule {
	var all []rules.Rule
	at := map[string]int{}
	for _, s := range sets {
		for _, r := range s.Rules {
			if i, ok := at[r.Name]; ok {
				all[i] = r
				continue
			}
			at[r.Name] = len(all)
			all = append(all, r)
		}
	}
	return all
}

// shareSets cuts the sets into n shares: a rule, by its name's place in
// all, is in the same share in every set. Without evidence, the rules keep
// none.
func shareSets(sets []RuleSet, all []rules.Rule, n int, evidence bool) [][]RuleSet {
	share := make(map[string]int, len(all))
	for i, r := range all {
		share[r.Name] = i % n
	}
	out := make([][]RuleSet, n)
	for i := range out {
		out[i] = make([]RuleSet, len(sets))
		for j, s := range sets {
			out[i][j] = RuleSet{At: s.At, From: s.From}
		}
	}
	for j, s := range sets {
		for _, r := range s.Rules {
			if !evidence {
				r.Evidence = 0 // a plain report lists no evidence: keeping it would only slow the replay
			}
			i := share[r.Name]
			out[i][j].Rules = append(out[i][j].Rules, r)
		}
	}
	return out
}

// addRules reads the rules line numbered n.
func (r *reader) addRules(line []byte, n int) error {
	s, err := parseRulesLine(line, fmt.Sprintf("rules line %d", n))
	if err != nil {
		return fmt.Errorf("backtest: %w", err)
	}
	if k := len(r.evs.RuleSets); k > 0 && !s.At.After(r.evs.RuleSets[k-1].At) {
		return fmt.Errorf("backtest: rules line %d is in force from %s, not after the rules line before it", n, atText(s.At))
	}
	r.evs.RuleSets = append(r.evs.RuleSets, s)
	return nil
}

// recordedFrom says that the rules came with the input, and when each set
// took effect.
func recordedFrom(input string, sets []RuleSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "recorded in %s: %s", input, sets[0].From)
	for _, s := range sets[1:] {
		fmt.Fprintf(&b, "; from %s: %s", atText(s.At), s.From)
	}
	return b.String()
}

// atText is a rules line's time as it is written: the report's own time
// format may differ.
func atText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
