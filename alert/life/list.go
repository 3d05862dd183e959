package life

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// MaxList bounds what one List reads.
const MaxList = 1000

// List returns up to limit open alerts (open or acknowledged), newest
// first, with their lives as Redis holds them now. It mends the index as
// it reads it: an entry whose alert is resolved, or whose life ended, or
// whose ref is unreadable leaves it.
func (s *Store) List(ctx context.Context, limit int) ([]Entry, error) {
	limit = min(max(limit, 1), MaxList)
	index, refs := s.keys.OpenAlerts()
	indexed, err := s.s.IndexedAlerts(ctx, index, refs, limit)
	if err != nil {
		return nil, fmt.Errorf("life: list open alerts: %w", err)
	}
	var keys, gone []string
	var named []alert.Ref
	for _, in := range indexed {
		var ref alert.Ref
		if json.Unmarshal([]byte(in.Ref), &ref) != nil || ref.Rule+"/"+ref.EventID != in.ID {
			gone = append(gone, in.ID)
			continue
		}
		g, err := s.group(ref)
		if err != nil {
			gone = append(gone, in.ID)
			continue
		}
		keys = append(keys, s.keys.Alert(g, ref.Rule, ref.EventID))
		named = append(named, ref)
	}
	var out []Entry
	if len(keys) > 0 {
		lives, err := s.s.Lives(ctx, keys...)
		if err != nil {
			return nil, fmt.Errorf("life: list open alerts: %w", err)
		}
		for i, l := range lives {
			e, ok := entryOf(named[i], l)
			if !ok || e.State.Status == alert.StatusResolved {
				gone = append(gone, named[i].Rule+"/"+named[i].EventID)
				continue
			}
			out = append(out, e)
		}
	}
	if err := s.s.Unindex(ctx, index, refs, gone...); err != nil {
		s.log.Warn("dropping resolved and ended alerts from the open alerts' index failed; the next list drops them", "err", err)
	}
	return out, nil
}

// OpenByRule counts the index's alerts by rule: those opened within
// Retention, up to MaxOpen, whether or not a list has dropped the resolved
// ones yet (Change drops what it resolves at once).
func (s *Store) OpenByRule(ctx context.Context) (map[string]int, error) {
	index, refs := s.keys.OpenAlerts()
	indexed, err := s.s.IndexedAlerts(ctx, index, refs, s.cfg.MaxOpen)
	if err != nil {
		return nil, fmt.Errorf("life: count open alerts: %w", err)
	}
	since := time.Now().Add(-s.cfg.Retention)
	out := map[string]int{}
	for _, in := range indexed {
		rule, _, ok := strings.Cut(in.ID, "/")
		if ok && in.At.After(since) {
			out[rule]++
		}
	}
	return out, nil
}

// CountOpenEvery sets fraudwatch_alerts_open{rule} from the index every
// CountEvery until ctx ends, with a series at 0 for each of rules (those
// in force: nil, none).
func (s *Store) CountOpenEvery(ctx context.Context, rules func() []string) {
	t := time.NewTicker(s.cfg.CountEvery)
	defer t.Stop()
	var warned time.Time
	for {
		if err := s.CountOpen(ctx, rules); err != nil && ctx.Err() == nil && time.Since(warned) > 10*time.Minute {
			warned = time.Now()
			s.log.Warn("counting open alerts", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CountOpen is one count of CountOpenEvery.
func (s *Store) CountOpen(ctx context.Context, rules func() []string) error {
	byRule, err := s.OpenByRule(ctx)
	if err != nil {
		return err
	}
	s.open.Reset()
	if rules != nil {
		for _, r := range rules() {
			s.open.WithLabelValues(r)
		}
	}
	for r, n := range byRule {
		s.open.WithLabelValues(r).Set(float64(n))
	}
	return nil
}
