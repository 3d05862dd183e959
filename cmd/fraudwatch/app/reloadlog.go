package app

import (
	"encoding/json"
	"strings"

	"github.com/fraudwatch/fraudwatch/rules"
)

// reloadChanges are a reload's changes as its log line carries them: in
// JSON a list of {rule, change, fresh_windows, fields: {field: {old, new}}},
// in text "burst: threshold 3 → 4; big: removed".
type reloadChanges []rules.Change

type loggedChange struct {
	Rule         string                 `json:"rule"`
	Change       string                 `json:"change"` // added, removed or changed
	FreshWindows bool                   `json:"fresh_windows"`
	Fields       map[string]loggedField `json:"fields,omitempty"`
}

type loggedField struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// whereHidden stands for a where: filter's values in the log: they may list
// customer ids or other personal data, which logs never carry.
const whereHidden = "(values not logged)"

func logged(f rules.FieldChange) rules.FieldChange {
	if f.Field == "where" {
		f.Old, f.New = whereHidden, whereHidden
	}
	return f
}

func (cs reloadChanges) MarshalJSON() ([]byte, error) {
	out := make([]loggedChange, len(cs))
	for i, c := range cs {
		out[i] = loggedChange{Rule: c.Rule, Change: c.Kind, FreshWindows: c.Resets}
		if len(c.Fields) > 0 {
			out[i].Fields = make(map[string]loggedField, len(c.Fields))
		}
		for _, f := range c.Fields {
			f = logged(f)
			out[i].Fields[f.Field] = loggedField{Old: f.Old, New: f.New}
		}
	}
	return json.Marshal(out)
}

// MarshalText is the text handler's rendering.
func (cs reloadChanges) MarshalText() ([]byte, error) {
	parts := make([]string, len(cs))
	for i, c := range cs {
		if c.Kind != "changed" {
			parts[i] = c.Rule + ": " + c.Kind
			continue
		}
		fields := make([]string, len(c.Fields))
		for j, f := range c.Fields {
			fields[j] = logged(f).String()
		}
		parts[i] = c.Rule + ": " + strings.Join(fields, ", ")
		if c.Resets {
			parts[i] += " (fresh windows)"
		}
	}
	return []byte(strings.Join(parts, "; ")), nil
}
