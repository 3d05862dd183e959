package rules

import (
	"context"
	"fmt"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// seal dates the crossings' alerts (published_at, to the millisecond) and
// writes each one's seal (alert.Alert.Seal) beside its crossing's mark, in
// one round trip, before they are published: the dispatcher posts an
// alert only as it was sealed, so whatever else is written to the alerts
// topic posts nothing. A batch that is retried publishes its alerts again
// with seals of their own (its evidence may differ); each is a version
// fraudwatch published. Only batches with crossings pay for it.
func (e *Engine) seal(ctx context.Context, x *crossings) error {
	at := time.UnixMilli(e.cfg.Now().UnixMilli()).UTC()
	seals := make([]lua.Seal, len(x.alerts))
	for i := range x.alerts {
		a := &x.alerts[i]
		a.PublishedAt = at
		h := a.Seal()
		seals[i] = lua.Seal{Marks: x.marks[i], ID: lua.IDOf(a.EventID), Hash: h[:], At: at}
	}
	if err := e.counters.Seal(ctx, e.keys.SealsSince(), seals); err != nil {
		return fmt.Errorf("rules: seal %d alerts: %w", len(seals), err)
	}
	return nil
}
