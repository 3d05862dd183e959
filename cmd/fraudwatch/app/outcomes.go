package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/rules"
)

// buildOutcomes makes the store of orders' outcomes, which the Slack
// buttons label through and every dispatcher tells of the alerts it
// opens, and the group that reads the outcomes topic into it.
func (a *App) buildOutcomes(base consumer.GroupConfig, opts Options) error {
	var err error
	log := a.log.With("component", "outcomes")
	if a.outcomes, err = outcome.NewStore(outcomeConfig(a.cfg), a.lua, a.lives, log, a.reg); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	a.outcomes.SetRules(ruleNamesOf(a.cfg.Rules))
	for _, d := range a.deliveries {
		d.disp.SetOutcomes(a.outcomes)
	}
	if a.outcomesIn, err = outcome.NewHandler(outcome.HandlerConfig{}, a.outcomes, log, a.reg); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	gc := base
	gc.GroupID = a.cfg.Kafka.OutcomesGroupID()
	gc.Topics = []string{a.cfg.Kafka.OutcomesTopic}
	// Every outcome written counts, those written before the group's
	// first start too.
	gc.StartEarliest = true
	if opts.Groups != nil {
		opts.Groups(&gc)
	}
	if a.outcomeGroup, err = consumer.NewGroup(gc, a.outcomesIn, log, a.reg); err != nil {
		return fmt.Errorf("app: outcomes group: %w", err)
	}
	return nil
}

// outcomeConfig is the outcome store's configuration.
func outcomeConfig(c *config.Config) outcome.StoreConfig {
	return outcome.StoreConfig{KeyPrefix: c.Redis.KeyPrefix, Retention: c.Outcomes.Retention, MaxOrders: c.Outcomes.MaxOrders}
}

// Outcomes is the store of orders' outcomes (the demo's summary reads
// each rule's quality from it).
func (a *App) Outcomes() *outcome.Store { return a.outcomes }

// OutcomeStore opens the outcome store of cfg's Redis for a command
// (fraudwatch label): it reads, and labels nothing itself (labels go
// through the outcomes topic, ProduceOutcomes). done closes it.
func OutcomeStore(cfg *config.Config) (*outcome.Store, func(), error) {
	rdb, err := NewRedis(cfg.Redis)
	if err != nil {
		return nil, nil, err
	}
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	lives, err := life.New(life.Config{KeyPrefix: cfg.Redis.KeyPrefix}, scripts, nil, nil, nil)
	if err == nil {
		var store *outcome.Store
		if store, err = outcome.NewStore(outcomeConfig(cfg), scripts, lives, nil, nil); err == nil {
			return store, func() { _ = rdb.Close() }, nil
		}
	}
	_ = rdb.Close()
	return nil, nil, fmt.Errorf("app: %w", err)
}

// ProduceOutcomes writes outcomes to the outcomes topic, each keyed by its
// order (or alert), acknowledged by every in-sync replica: a replica's
// outcomes group records them.
func ProduceOutcomes(ctx context.Context, k config.Kafka, outcomes []outcome.Outcome) error {
	if len(outcomes) == 0 {
		return errors.New("app: no outcome to write")
	}
	tc, mech, err := kafkaSecurity(k)
	if err != nil {
		return err
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(k.Brokers...),
		Topic:        k.OutcomesTopic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond,
		Transport:    &kafka.Transport{ClientID: k.ClientID, TLS: tc, SASL: mech},
	}
	msgs := make([]kafka.Message, len(outcomes))
	for i, o := range outcomes {
		key := o.OrderID
		if o.AlertID != "" {
			key = o.AlertID
		}
		msgs[i] = kafka.Message{Key: []byte(key), Value: o.Record()}
	}
	err = w.WriteMessages(ctx, msgs...)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %d outcomes to %s: %w", len(outcomes), k.OutcomesTopic, err)
	}
	return nil
}

// outcomeRules hands the rules in force to the outcome store, as the
// reloader hands them to the dispatchers.
type outcomeRules struct{ s *outcome.Store }

func (o outcomeRules) SetRules(rules map[string]dispatch.RuleSettings) {
	o.s.SetRules(slices.Collect(maps.Keys(rules)))
}

func ruleNamesOf(rs []rules.Rule) []string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name
	}
	return names
}
