package redistest

import (
	"context"
	"testing"
)

// NewCluster builds clusters redis-cli refuses to (fewer than 3 masters),
// for the bench's 1-master rows, as well as the usual 3.
func TestNewClusterServesEverySlotWithTheMastersAsked(t *testing.T) {
	for _, masters := range []int{1, 2, 3} {
		c, err := NewCluster(t.TempDir(), masters)
		if err != nil {
			t.Fatalf("%d masters: %v", masters, err)
		}
		got, err := c.Masters(context.Background())
		rdb := c.Client(t)
		// A key of every master's share of the slots is writable.
		for _, key := range []string{"{a}", "{b}", "{c}", "{d}", "{e}"} {
			if err := rdb.Set(context.Background(), key, 1, 0).Err(); err != nil {
				t.Errorf("%d masters: set %s: %v", masters, key, err)
			}
		}
		c.Stop()
		if err != nil || len(got) != masters {
			t.Errorf("%d masters asked, %d serve slots (%v, %v)", masters, len(got), got, err)
		}
	}
}
