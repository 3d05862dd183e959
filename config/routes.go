package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Route is one item of the rules file's routes: the rules it matches, the
// receivers their alerts go to, and whether the routes after it are
// tried too. Routes are tried in order; the first that matches a rule
// ends the search unless it says continue: true (Alertmanager's way). A
// rule no route matches goes to default_receivers.
type Route struct {
	Match     Match    `mapstructure:"match"`
	Receivers []string `mapstructure:"receivers"`
	Continue  bool     `mapstructure:"continue"`
}

// Match says which rules a route takes: each criterion given must hold
// (a rule in Rules, a severity in Severities, the mode Mode); one not
// given holds for every rule, so an empty match takes them all.
type Match struct {
	Rules      []string         `mapstructure:"rules"`
	Severities []alert.Severity `mapstructure:"severities"`
	Mode       alert.Mode       `mapstructure:"mode"`
}

func (m Match) matches(r *rules.Rule) bool {
	return (len(m.Rules) == 0 || slices.Contains(m.Rules, r.Name)) &&
		(len(m.Severities) == 0 || slices.Contains(m.Severities, r.Severity)) &&
		(m.Mode == "" || m.Mode == r.Mode)
}

// Routing is where each rule's alerts go, by rule name. A rule it lacks
// (all of them, in a file without routes and links) reaches every
// receiver, with no links: its zero RuleRoute.
type Routing map[string]RuleRoute

// RuleRoute is where one rule's alerts go.
type RuleRoute struct {
	// Receivers are the receivers' names, in the order the routes name
	// them; nil when the rules file has neither routes nor
	// default_receivers: every receiver then.
	Receivers []string
	// Routes are the indexes of the routes that matched the rule; none
	// when it went to default_receivers.
	Routes []int
	// Links are the rule's own link templates (its links:).
	Links []alert.LinkTemplate
}

// Routed reports whether the rules file routes alerts at all: without
// routes or default_receivers every rule reaches every receiver.
func (s *RuleSet) Routed() bool { return len(s.Routes) > 0 || len(s.DefaultReceivers) > 0 }

// Version names the rules and where they go: rules.Version of the rules
// alone when the file has no routes, default_receivers or links, so that
// a file without them keeps its version.
func (s *RuleSet) Version() string {
	v := rules.Version(s.Rules)
	links := map[string][]alert.LinkTemplate{}
	for name, rr := range s.Routing {
		if len(rr.Links) > 0 {
			links[name] = rr.Links
		}
	}
	if !s.Routed() && len(links) == 0 {
		return v
	}
	// Slices, maps of slices and strings: Marshal cannot fail.
	data, _ := json.Marshal(struct {
		Rules   string
		Routes  []Route
		Default []string
		Links   map[string][]alert.LinkTemplate
	}{v, s.Routes, s.DefaultReceivers, links})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// CheckReceivers reports the routes' problems that need the receivers of
// the config file too: a receiver no receiver: item is named, and, when
// the file routes, a receiver no rule's alerts reach. The errors name the
// rules file.
func (s *RuleSet) CheckReceivers(receivers []Receiver) error {
	names := make([]string, len(receivers))
	for i, r := range receivers {
		names[i] = r.Name
	}
	opts := decodeOptions{File: s.File}
	var errs []error
	unknown := func(field, name string) {
		if !slices.Contains(names, name) {
			errs = append(errs, opts.fieldError(field, fmt.Sprintf("no receiver is named %q (the configuration's are %s)",
				name, strings.Join(names, ", "))))
		}
	}
	for i, rt := range s.Routes {
		for j, name := range rt.Receivers {
			unknown(fmt.Sprintf("routes[%d].receivers[%d]", i, j), name)
		}
	}
	for j, name := range s.DefaultReceivers {
		unknown(fmt.Sprintf("default_receivers[%d]", j), name)
	}
	if !s.Routed() {
		return errors.Join(errs...)
	}
	for _, name := range names {
		reached := false
		for _, rr := range s.Routing {
			reached = reached || slices.Contains(rr.Receivers, name)
		}
		if !reached {
			errs = append(errs, opts.fieldError("routes", fmt.Sprintf(
				"no rule's alerts reach receiver %q: route a rule to it, or remove it from the configuration's receivers", name)))
		}
	}
	return errors.Join(errs...)
}

// routesLayout is the part of a rules file that says where alerts go.
type routesLayout struct {
	Routes           []Route  `mapstructure:"routes"`
	DefaultReceivers []string `mapstructure:"default_receivers"`
}

// parseRoutes reads the rules file's routes and default_receivers and
// resolves them for rs, with each rule's links, reporting every problem
// the rules file alone shows.
func parseRoutes(top map[string]any, file string, rs []rules.Rule, links map[string][]alert.LinkTemplate) (routesLayout, Routing, []error) {
	var l routesLayout
	in := map[string]any{"routes": top["routes"], "default_receivers": top["default_receivers"]}
	opts := decodeOptions{File: file}
	if errs := append(unknownKeys(in, &l, opts), decodeStrict(in, &l, opts)...); len(errs) > 0 {
		return l, nil, errs
	}
	c := &ruleChecker{opts: opts, failed: map[string]bool{}}
	for i, rt := range l.Routes {
		at := fmt.Sprintf("routes[%d]", i)
		c.receiverNames(at+".receivers", rt.Receivers)
		for j, name := range rt.Match.Rules {
			if !slices.ContainsFunc(rs, func(r rules.Rule) bool { return r.Name == name }) {
				c.bad(fmt.Sprintf("%s.match.rules[%d]", at, j), "no rule is named %q", name)
			}
		}
		for j, sev := range rt.Match.Severities {
			if !slices.Contains(alert.Severities, sev) {
				c.bad(fmt.Sprintf("%s.match.severities[%d]", at, j), "must be info, warning, high or critical, not %q", sev)
			}
		}
		if m := rt.Match.Mode; m != "" && m != alert.ModeAlert && m != alert.ModeShadow {
			c.bad(at+".match.mode", "must be alert or shadow, not %q", m)
		}
	}
	if top["default_receivers"] != nil {
		c.receiverNames("default_receivers", l.DefaultReceivers)
	}
	routing := route(l, rs, links)
	if len(c.errs) == 0 {
		c.reach(l, rs, routing)
	}
	return l, routing, c.errs
}

// receiverNames checks a list of receiver names.
func (c *ruleChecker) receiverNames(field string, names []string) {
	if len(names) == 0 {
		c.bad(field, "names no receiver")
	}
	for j, name := range names {
		if err := lua.ValidReceiver(name); err != nil {
			c.bad(fmt.Sprintf("%s[%d]", field, j), "%v", err)
		} else if slices.Index(names, name) != j {
			c.bad(fmt.Sprintf("%s[%d]", field, j), "repeats %q", name)
		}
	}
}

// route resolves where each rule's alerts go: nil when the file has no
// routes, default_receivers or links, whose zero RuleRoute for each rule
// says as much.
func route(l routesLayout, rs []rules.Rule, links map[string][]alert.LinkTemplate) Routing {
	routed := len(l.Routes) > 0 || len(l.DefaultReceivers) > 0
	if !routed && len(links) == 0 {
		return nil
	}
	out := make(Routing, len(rs))
	for i := range rs {
		r := &rs[i]
		rr := RuleRoute{Links: links[r.Name]}
		if routed {
			rr.Receivers = []string{}
		}
		for j, rt := range l.Routes {
			if !rt.Match.matches(r) {
				continue
			}
			rr.Routes = append(rr.Routes, j)
			for _, name := range rt.Receivers {
				if !slices.Contains(rr.Receivers, name) {
					rr.Receivers = append(rr.Receivers, name)
				}
			}
			if !rt.Continue {
				break
			}
		}
		if len(rr.Routes) == 0 && len(l.DefaultReceivers) > 0 {
			rr.Receivers = slices.Clone(l.DefaultReceivers)
		}
		out[r.Name] = rr
	}
	return out
}

// reach reports a route no rule reaches, and an alert rule whose alerts
// reach no receiver: either is a mistake in the routes.
func (c *ruleChecker) reach(l routesLayout, rs []rules.Rule, routing Routing) {
	for j, rt := range l.Routes {
		var matching []string
		for i := range rs {
			if rt.Match.matches(&rs[i]) {
				matching = append(matching, rs[i].Name)
			}
		}
		switch {
		case len(matching) == 0:
			c.bad(fmt.Sprintf("routes[%d]", j), "matches no rule")
		case !slices.ContainsFunc(matching, func(name string) bool { return slices.Contains(routing[name].Routes, j) }):
			c.bad(fmt.Sprintf("routes[%d]", j), "is never reached: the rules it matches (%s) stop at earlier routes, which have no continue: true",
				strings.Join(matching, ", "))
		}
	}
	for i := range rs {
		r := &rs[i]
		if r.Enabled && r.Mode == alert.ModeAlert && routing[r.Name].Receivers != nil && len(routing[r.Name].Receivers) == 0 {
			c.errs = append(c.errs, &FieldError{File: c.opts.File, Rule: fmt.Sprintf("%q", r.Name),
				Msg: "no route matches it and there are no default_receivers: its alerts would reach no receiver"})
		}
	}
}

// links checks a rule's link templates against its group_by.
func (c *ruleChecker) links(ls []alert.LinkTemplate, groupBy []string) []alert.LinkTemplate {
	for j, l := range ls {
		if err := l.Check(groupBy); err != nil {
			c.bad(fmt.Sprintf("links[%d]", j), "%v", err)
		}
	}
	return ls
}
