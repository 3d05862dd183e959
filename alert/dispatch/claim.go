package dispatch

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// claimed decides an alert (alert_claim) for the dispatcher's receiver
// and records the decision: ClaimSend when it is to be sent, now its
// claimant's; otherwise it is settled (shadow, suppressed, silenced, sent
// or given up before) or another claimant holds it (a copy on another
// partition: that claimant's own message stays uncommitted until it
// settles). Every alert passes here or through claimedAll before it is
// sent, whether read from the topic, waiting or parked. A shadow alert's
// is ClaimSuppressed.
func (d *Dispatcher) claimed(ctx context.Context, a alert.Alert) (lua.Claim, error) {
	claims, err := d.claimedAll(ctx, []alert.Alert{a})
	if err != nil {
		return 0, err
	}
	return claims[0], nil
}

// claimedAll is claimed of each alert, in order, in a few round trips
// however many (a drain pass's, a retry's of parked alerts): the claims
// go in one pipeline (ClaimAlerts), then those to send are indexed
// together (indexAll). The decisions are recorded once all of it
// succeeded; an error fails the whole, and a claim asked again answers
// the same.
func (d *Dispatcher) claimedAll(ctx context.Context, alerts []alert.Alert) ([]lua.Claim, error) {
	claims := make([]lua.Claim, len(alerts)) // a shadow alert's stays ClaimSuppressed
	groups := make([]lua.Group, len(alerts))
	var asked []lua.AlertClaim
	var at []int // the alerts asked, by their place in alerts
	for i, a := range alerts {
		if a.Shadow() {
			continue
		}
		if a.Claimant == "" {
			return nil, fmt.Errorf("alert: claim %s: no claimant", a.ID)
		}
		k, err := d.alertKeys(a)
		if err != nil {
			return nil, fmt.Errorf("alert: claim %s: %w", a.ID, err)
		}
		groups[i] = k.group
		asked = append(asked, lua.AlertClaim{CooldownKey: a.CooldownKey, RecordKey: k.record,
			LegacyKey: a.RecordKey, AlertKey: k.alert, Alert: lifeCopy(a), ID: a.ID, Claimant: a.Claimant, Cooldown: a.Cooldown,
			SilenceKey: a.SilenceKey, RuleSilenceKey: a.RuleSilence})
		at = append(at, i)
	}
	if len(asked) > 0 {
		got, err := d.claims.ClaimAlerts(ctx, asked)
		if err != nil {
			return nil, fmt.Errorf("alert: claim %s: %w", namesOf(alerts), err)
		}
		var send []int
		for j, c := range got {
			claims[at[j]] = c
			if c == lua.ClaimSend {
				send = append(send, at[j])
			}
		}
		if err := d.indexAll(ctx, alerts, groups, send); err != nil {
			return nil, fmt.Errorf("alert: claim %s: %w", namesOf(alerts), err)
		}
	}
	for i, a := range alerts {
		if a.Shadow() {
			d.record(SuppressedShadow, []alert.Alert{a}, "current", a.Current, "threshold", a.Threshold)
		} else if outcome, settled := claimOutcomes[claims[i]]; settled && (claims[i] != lua.ClaimElsewhere || a.Claimant != lua.ParkedClaimant) {
			d.record(outcome, []alert.Alert{a}, "claimant", a.Claimant)
		}
	}
	return claims, nil
}

// namesOf names alerts in an error: the id of one, or how many and the
// first's.
func namesOf(alerts []alert.Alert) string {
	if len(alerts) == 1 {
		return alerts[0].ID
	}
	return fmt.Sprintf("%d alerts from %s", len(alerts), alerts[0].ID)
}

// indexAll adds the claimed alerts send names (by their place in alerts,
// groups[i] alerts[i]'s group) to the index of open alerts, and notes
// them for their outcomes, each kind pipelined. Every claim that sends
// does both (ZADD NX: its first place stays; the note is idempotent), so
// that a crash between the claim and these is mended by the claim that
// comes round again.
func (d *Dispatcher) indexAll(ctx context.Context, alerts []alert.Alert, groups []lua.Group, send []int) error {
	if len(send) == 0 {
		return nil
	}
	entries := make([]lua.Indexing, len(send))
	sent := make([]alert.Alert, len(send))
	refs := make([]alert.Ref, len(send))
	for j, i := range send {
		a := alerts[i]
		refs[j], sent[j] = alert.Ref{Rule: a.Rule, Group: groups[i].Encoding(), EventID: a.EventID}, a
		ref, err := json.Marshal(refs[j])
		if err != nil {
			return fmt.Errorf("the ref of %s: %w", a.ID, err)
		}
		entries[j] = lua.Indexing{ID: a.ID, Ref: string(ref)}
	}
	index, refsKey := d.keys.OpenAlerts()
	if err := d.claims.IndexAlerts(ctx, index, refsKey, entries, d.cfg.MaxOpen, d.claims.Retention()); err != nil {
		return fmt.Errorf("index it open: %w", err)
	}
	if o := d.outcomes.Load(); o != nil {
		if err := (*o).OpenedAll(ctx, sent, refs); err != nil {
			return fmt.Errorf("note it for its outcomes: %w", err)
		}
	}
	return nil
}
