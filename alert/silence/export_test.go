package silence

import (
	"context"
	"time"
)

// OldAcknowledge writes an acknowledgement into the history as versions
// before records per receiver did, for the tests that it still shows.
func (s *Store) OldAcknowledge(ctx context.Context, rule, group string, match map[string]string, who string, now time.Time) (Event, error) {
	g, err := s.keys.ParseGroup(group)
	if err != nil {
		return Event{}, err
	}
	ref, err := s.GroupRef(ctx, g.Encoding())
	if err != nil {
		return Event{}, err
	}
	e := Event{At: now.UTC(), What: Acknowledged, By: who, Silence: Silence{Rule: rule, Match: match, Group: group, GroupRef: ref}}
	return e, s.record(ctx, now, e)
}
