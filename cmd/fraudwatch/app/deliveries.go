package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer"
)

// delivery is one receiver's way from the alerts topic: its dispatcher
// and the consumer group that feeds it. Each receiver reads the topic in a
// group of its own, so that its outage or its refusals hold only its own
// partitions' offsets: the other receivers' alerts flow on.
type delivery struct {
	name     string
	rc       config.Receiver
	notifier alert.Notifier
	disp     *dispatch.Dispatcher
	group    *consumer.Group
}

// receiverSpec is a receiver as the app builds its delivery: its
// configuration, its notifier and the dispatcher settings of its own
// (budgets, digests).
type receiverSpec struct {
	rc       config.Receiver
	notifier alert.Notifier
	cfg      dispatch.DispatcherConfig
}

// receiverSpecs makes the notifier and dispatcher settings of each
// receiver the configuration names. A notifier a caller supplied (the
// demo's console) stands in for the configured receiver of its name,
// which keeps its routes, links and alerts group, beside the others; when
// no configured receiver has its name, it is the one receiver, which every
// rule reaches.
func (a *App) receiverSpecs(opts Options) ([]receiverSpec, error) {
	list := a.cfg.ReceiverList()
	n := opts.Notifier
	if n != nil && !slices.ContainsFunc(list, func(rc config.Receiver) bool { return rc.Name == n.Name() }) {
		return []receiverSpec{{rc: config.Receiver{Name: n.Name()}, notifier: n, cfg: dispatcherConfig(a.cfg, opts.Dispatcher)}}, nil
	}
	var specs []receiverSpec
	for _, rc := range list {
		if n != nil && rc.Name == n.Name() {
			specs = append(specs, receiverSpec{rc: rc, notifier: n, cfg: dispatcherConfig(a.cfg, opts.Dispatcher)})
			continue
		}
		made, budget, err := newReceiver(rc, a.log)
		if err != nil {
			return nil, fmt.Errorf("app: receiver %s: %w", rc.Name, err)
		}
		dc := dispatcherConfig(a.cfg, opts.Dispatcher)
		if rc.Slack != nil {
			dc = slackBudgets(*rc.Slack, dc)
		}
		if budget != nil {
			// One destination: its budget is the receiver's.
			dc.ChannelBudget, dc.OverallBudget = *budget, *budget
		}
		specs = append(specs, receiverSpec{rc: rc, notifier: made, cfg: dc})
	}
	return specs, nil
}

// alertsGroupID is the consumer group of receiver's dispatchers. The
// receivers of versions before receivers, slack and log (the slack:
// section, or nothing), and a notifier a caller supplies (the demo's
// console), keep the group those versions used (<group_id>.alerts), so
// that an upgrade resumes where it stopped; every other receiver reads in
// <group_id>.alerts.<name>, whatever else the configuration holds, so that
// no change of the others moves it to another group's offsets.
func alertsGroupID(k config.Kafka, receiver string, supplied bool) string {
	if supplied || receiver == config.LegacySlackReceiver || receiver == config.LegacyLogReceiver {
		return k.AlertsGroupID()
	}
	return k.AlertsGroupID() + "." + receiver
}

// buildDeliveries makes a dispatcher and an alerts group for each
// receiver, each dispatcher knowing the rules in force.
func (a *App) buildDeliveries(specs []receiverSpec, base consumer.GroupConfig, opts Options) error {
	if len(specs) == 0 {
		return errors.New("app: no receiver to deliver alerts to")
	}
	seen := map[string]bool{}
	for _, s := range specs {
		name := s.notifier.Name()
		if seen[name] {
			return fmt.Errorf("app: two receivers are named %q", name)
		}
		seen[name] = true
		log := a.log.With("component", "alert", "receiver", name)
		groupID := alertsGroupID(a.cfg.Kafka, name, s.rc.Kind == "")
		dc := s.cfg
		// A group of its own reads the topic from its start: a receiver
		// added later is sent what was published since it first ran.
		dc.SkipHistory = groupID != a.cfg.Kafka.AlertsGroupID()
		d, err := dispatch.NewDispatcher(dc, s.notifier, a.lua, log, a.reg)
		if err != nil {
			return fmt.Errorf("app: receiver %s: %w", name, err)
		}
		d.SetRules(ruleSettings(a.cfg.RuleSet(), s.rc))
		gc := base
		gc.GroupID = groupID
		if opts.Groups != nil {
			opts.Groups(&gc)
		}
		g, err := consumer.NewGroup(gc, d, a.log.With("component", "alerts", "receiver", name), a.reg)
		if err != nil {
			return fmt.Errorf("app: receiver %s: %w", name, err)
		}
		a.deliveries = append(a.deliveries, delivery{name: name, rc: s.rc, notifier: s.notifier, disp: d, group: g})
	}
	return nil
}

// ruleTakers are the deliveries' dispatchers as the reloader hands them
// new rules: each with its receiver.
func (a *App) ruleTakers() dispatchers {
	ds := make(dispatchers, len(a.deliveries))
	for i, d := range a.deliveries {
		ds[i] = receiverRules{Receiver: d.rc, Rules: d.disp}
	}
	return append(ds, receiverRules{Rules: outcomeRules{a.outcomes}})
}

// alertsReady reports whether every receiver's alerts group holds its
// assignment, and if not, which and why.
func (a *App) alertsReady() (bool, string) {
	var problems []string
	for _, d := range a.deliveries {
		if d.group.Ready() {
			continue
		}
		if len(a.deliveries) == 1 {
			problems = append(problems, "kafka alerts group: "+d.group.Status())
		} else {
			problems = append(problems, fmt.Sprintf("kafka alerts group of %s: %s", d.name, d.group.Status()))
		}
	}
	return len(problems) == 0, strings.Join(problems, "\n")
}

// runDeliveries runs every receiver's group, parked retries and waiting
// drain until ctx ends; it returns the groups' errors.
func (a *App) runDeliveries(ctx context.Context) error {
	errs := make([]error, len(a.deliveries))
	var wg sync.WaitGroup
	for i, d := range a.deliveries {
		wg.Go(func() { d.disp.RetryParkedEvery(ctx) })
		wg.Go(func() { d.disp.DrainWaitingEvery(ctx) })
		wg.Go(func() { errs[i] = d.group.Run(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// receiverNames names the receivers, for run's start line.
func (a *App) receiverNames() []string {
	names := make([]string, len(a.deliveries))
	for i, d := range a.deliveries {
		names[i] = d.name
	}
	return names
}

// recent is the alerts every receiver's dispatcher settled last, newest
// first, at most 50.
func (a *App) recent() []dispatch.Settled {
	var all []dispatch.Settled
	for _, d := range a.deliveries {
		all = append(all, d.disp.Recent()...)
	}
	slices.SortStableFunc(all, func(x, y dispatch.Settled) int { return y.At.Compare(x.At) })
	return all[:min(len(all), 50)]
}
