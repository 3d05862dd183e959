package config

import (
	"errors"
	"fmt"
	"os"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/rules"
)

// RuleSet is what a rules file holds (docs/configuration.md, Rules).
type RuleSet struct {
	Rules []rules.Rule
	// EventFields are the fields beyond the schema that the deployment's
	// events carry (event_fields): rules name them without a warning.
	EventFields []string
	// Routes and DefaultReceivers are the file's routes and
	// default_receivers, and Routing where they send each rule's alerts,
	// with the rule's links (routes.go). CheckReceivers checks them
	// against the configuration's receivers.
	Routes           []Route
	DefaultReceivers []string
	Routing          Routing
	// File names the file in errors.
	File string
}

// LoadRules reads a rules file (docs/configuration.md, Rules), checks every rule and
// applies the defaults of its optional fields.
func LoadRules(path string) ([]rules.Rule, error) {
	s, err := LoadRuleSet(path)
	return s.Rules, err
}

// LoadRuleSet is LoadRules with the file's event_fields.
func LoadRuleSet(path string) (RuleSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return RuleSet{}, fmt.Errorf("rules: %w", err)
	}
	return ParseRuleSet(data, path)
}

// ParseRules reads and checks rules from YAML; file names the source in
// errors, which are *FieldErrors naming the rule and the field. Every
// problem found is reported, not just the first.
func ParseRules(data []byte, file string) ([]rules.Rule, error) {
	s, err := ParseRuleSet(data, file)
	return s.Rules, err
}

// ParseRuleSet is ParseRules with the file's event_fields.
func ParseRuleSet(data []byte, file string) (RuleSet, error) {
	doc, err := parseYAML(data, file)
	if err != nil {
		return RuleSet{}, err
	}
	top, ok := doc.(map[string]any)
	if doc != nil && !ok {
		return RuleSet{}, &FieldError{File: file, Msg: "must be a mapping with a list under rules:"}
	}
	var layout struct {
		Rules            any `mapstructure:"rules"`
		EventFields      any `mapstructure:"event_fields"`
		Routes           any `mapstructure:"routes"`
		DefaultReceivers any `mapstructure:"default_receivers"`
	}
	errs := unknownKeys(top, &layout, decodeOptions{File: file})
	fields, ferrs := eventFields(top["event_fields"], file)
	errs = append(errs, ferrs...)
	list, ok := top["rules"].([]any)
	if !ok {
		errs = append(errs, &FieldError{File: file, Field: "rules", Msg: "must be a list of rules"})
		return RuleSet{}, errors.Join(errs...)
	}
	if len(list) == 0 {
		errs = append(errs, &FieldError{File: file, Field: "rules", Msg: "no rules defined"})
	}
	var out []rules.Rule
	links := map[string][]alert.LinkTemplate{}
	seen := map[string]int{}
	for i, item := range list {
		r, ls, err := decodeRule(item, file, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[r.Name]; dup {
			errs = append(errs, &FieldError{File: file, Rule: fmt.Sprintf("%q (#%d)", r.Name, i+1), Field: "name",
				Msg: fmt.Sprintf("duplicate of rule #%d: names must be unique", prev+1)})
			continue
		}
		seen[r.Name] = i
		out = append(out, r)
		if len(ls) > 0 {
			links[r.Name] = ls
		}
	}
	if err := errors.Join(errs...); err != nil {
		return RuleSet{}, err
	}
	// Routes name rules: they are checked once the rules are.
	rl, routing, rerrs := parseRoutes(top, file, out, links)
	if err := errors.Join(rerrs...); err != nil {
		return RuleSet{}, err
	}
	return RuleSet{Rules: out, EventFields: fields, Routes: rl.Routes, DefaultReceivers: rl.DefaultReceivers,
		Routing: routing, File: file}, nil
}
