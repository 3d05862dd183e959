package outcome

import (
	"context"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// OpenAt notes an alert that opened at opened: a test's alerts of days
// ago.
func OpenAt(ctx context.Context, s *Store, a alert.Alert, ref alert.Ref, opened time.Time) error {
	return s.open(ctx, a, ref, opened)
}
