package app

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app/status"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/rules"
)

// statusSource is what the status page reads of the app.
type statusSource struct {
	a        *App
	silences *silence.Store
	lives    *life.Store
}

func newStatusSource(a *App) (*statusSource, error) {
	keys, err := lua.NewKeys(a.cfg.Redis.KeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	// Reads only: it says nothing on the alerts topic, and exports no
	// gauge (nil registry).
	lives, err := life.New(life.Config{KeyPrefix: a.cfg.Redis.KeyPrefix, Retention: a.lua.Retention()}, a.lua, nil, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	return &statusSource{a: a, silences: silence.NewStore(a.rdb, a.lua, keys), lives: lives}, nil
}

// openNewest is how many open alerts the page lists.
const openNewest = 20

func (s *statusSource) Open(ctx context.Context) (status.Open, error) {
	byRule, err := s.lives.OpenByRule(ctx)
	if err != nil {
		return status.Open{}, err
	}
	// The newest first: up to life.MaxList of them make each rule's
	// figures of acknowledgement, the first openNewest are listed.
	listed, err := s.lives.List(ctx, life.MaxList)
	if err != nil {
		return status.Open{}, err
	}
	return status.Open{ByRule: byRule, Newest: listed[:min(len(listed), openNewest)], Acks: status.AcksOf(listed, time.Now())}, nil
}

func (s *statusSource) Quality(ctx context.Context, now time.Time) ([]outcome.RuleQuality, error) {
	// Every rule in force has its row, those with no alert and no
	// outcome too.
	return s.a.outcomes.QualityOf(ctx, now, s.a.ruleNames(), status.QualityPeriods...)
}

func (s *statusSource) Rules() (string, []rules.Rule) {
	rs := s.a.rules.inForce()
	return rules.Version(rs), rs
}

func (s *statusSource) Reload() status.Reload { return s.a.rules.lastReading() }

func (s *statusSource) Recent() []dispatch.Settled { return s.a.recent() }

func (s *statusSource) Silences(ctx context.Context) ([]silence.Silence, error) {
	return s.silences.List(ctx, time.Now())
}

// Lag reads the lag gauge both groups export: the page shows what
// Prometheus sees.
func (s *statusSource) Lag() []status.Lag {
	families, err := s.a.reg.Gather()
	if err != nil {
		return nil
	}
	var out []status.Lag
	for _, mf := range families {
		if mf.GetName() != "fraudwatch_consumer_lag" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var l status.Lag
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "topic":
					l.Topic = lp.GetValue()
				case "partition":
					l.Partition, _ = strconv.Atoi(lp.GetValue())
				}
			}
			l.Messages = m.GetGauge().GetValue()
			out = append(out, l)
		}
	}
	return out
}
