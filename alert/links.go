package alert

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// LinkTemplate makes a Link from an alert's fields: {order_id}, {event_id},
// {rule}, {id}, and each of the rule's group_by fields by its name
// ({customer_id}). Values are path-escaped, so that no field can change
// the link's host or add to its query.
type LinkTemplate struct {
	Text string `mapstructure:"text" json:"text"`
	URL  string `mapstructure:"url" json:"url"`
}

// placeholder is one {name} in a template.
var placeholder = regexp.MustCompile(`\{([a-z][a-z0-9_]{0,63})\}`)

// linkFields are the placeholders every alert fills; group_by fields add
// to them per rule.
var linkFields = []string{"order_id", "event_id", "rule", "id"}

// Check reports a template that cannot make a link for a rule grouping by
// groupBy: no text or URL, a URL that is not absolute http(s), or a
// placeholder the rule's alerts do not fill.
func (t LinkTemplate) Check(groupBy []string) error {
	if strings.TrimSpace(t.Text) == "" || strings.TrimSpace(t.URL) == "" {
		return fmt.Errorf("link %q: text and url are both required", t.Text)
	}
	u, err := url.Parse(placeholder.ReplaceAllString(t.URL, "x"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("link %q: url %q is not an absolute http(s) URL", t.Text, t.URL)
	}
	for _, m := range placeholder.FindAllStringSubmatch(t.URL+t.Text, -1) {
		if !slices.Contains(linkFields, m[1]) && !slices.Contains(groupBy, m[1]) {
			return fmt.Errorf("link %q: {%s} is not a field its alerts carry (%s, or the rule's group_by)",
				t.Text, m[1], strings.Join(linkFields, ", "))
		}
	}
	if strings.ContainsAny(placeholder.ReplaceAllString(t.URL+t.Text, ""), "{}") {
		return fmt.Errorf("link %q: a { or } that is not a {field}", t.Text)
	}
	return nil
}

// Make fills the template with a's fields. A placeholder a does not fill
// (an alert of a rule whose group_by changed) leaves the link out.
func (t LinkTemplate) Make(a Alert) (Link, bool) {
	fields := map[string]string{"order_id": a.OrderID, "event_id": a.EventID, "rule": a.Rule, "id": a.ID}
	for i, f := range a.GroupBy {
		if i < len(a.GroupValues) {
			fields[f] = a.GroupValues[i]
		}
	}
	ok := true
	fill := func(s string, escape func(string) string) string {
		return placeholder.ReplaceAllStringFunc(s, func(m string) string {
			v, found := fields[m[1:len(m)-1]]
			if !found || v == "" {
				ok = false
			}
			return escape(v)
		})
	}
	l := Link{Text: fill(t.Text, func(s string) string { return s }), URL: fill(t.URL, url.PathEscape)}
	return l, ok
}

// MakeLinks makes each template's link for a, leaving out those a cannot
// fill.
func MakeLinks(ts []LinkTemplate, a Alert) []Link {
	var ls []Link
	for _, t := range ts {
		if l, ok := t.Make(a); ok {
			ls = append(ls, l)
		}
	}
	return ls
}
