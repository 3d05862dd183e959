package config

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fraudwatch/fraudwatch/alert"
)

// RouteTable lists, a rule a line in file order, the receivers its
// alerts reach, the routes that took it there and the links they carry:
// the rule's own, then each receiver's that the rule's alerts fill, after
// the receiver's name. It holds no secret: receivers are named, never
// their URLs or keys. For example:
//
//	RULE         RECEIVERS     BY                    LINKS
//	card-amount  pager, slack  routes[0]             Card https://bo.example/cards/{card_fingerprint}; pager: Customer https://…/{customer_id}
//	burst        slack         default_receivers     -
func (c *Config) RouteTable() string {
	recvs := c.ReceiverList()
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tRECEIVERS\tBY\tLINKS")
	for i := range c.Rules {
		r := &c.Rules[i]
		rr := c.Routing[r.Name]
		names, by := rr.Receivers, "every receiver (no routes)"
		switch {
		case rr.Receivers == nil:
			names = make([]string, len(recvs))
			for j, rc := range recvs {
				names[j] = rc.Name
			}
		case len(rr.Routes) > 0:
			var rs []string
			for _, j := range rr.Routes {
				rs = append(rs, fmt.Sprintf("routes[%d]", j))
			}
			by = strings.Join(rs, ", ")
		case len(c.DefaultReceivers) > 0:
			by = "default_receivers"
		default:
			by = "no route"
		}
		var links []string
		for _, l := range rr.Links {
			links = append(links, linkText(l))
		}
		for _, rc := range recvs {
			if !slices.Contains(names, rc.Name) {
				continue
			}
			for _, l := range rc.LinksFor(r.GroupBy) {
				links = append(links, rc.Name+": "+linkText(l))
			}
		}
		receivers := strings.Join(names, ", ")
		if receivers == "" {
			receivers = "-"
		}
		if len(links) == 0 {
			links = []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, receivers, by, strings.Join(links, "; "))
	}
	tw.Flush()
	return b.String()
}

func linkText(l alert.LinkTemplate) string { return l.Text + " " + l.URL }

// receiversSummary is Summary's "alerts to" with a receivers: list: each
// receiver's name and kind.
func (c *Config) receiversSummary() string {
	var parts []string
	for _, r := range c.ReceiverList() {
		kind := string(r.Kind)
		if r.Kind == KindSlack {
			kind = slackSummary(r.Slack)
		}
		parts = append(parts, r.Name+" ("+kind+")")
	}
	return plural(len(parts), "receiver", "receivers") + ": " + strings.Join(parts, ", ")
}

// slackSummary says how a Slack receiver posts.
func slackSummary(s *Slack) string {
	switch s.Mode() {
	case SlackWebhook:
		return "slack webhook"
	case SlackToken:
		return "slack bot token to " + s.Channel
	}
	return "log"
}
