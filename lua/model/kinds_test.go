package model

import (
	"testing"

	"github.com/fraudwatch/fraudwatch/lua"
)

// Every counting script has its body in the model, pinned by its code: a
// backtest replays every kind (CONTRIBUTING.md, "Adding a rule kind").
func TestEveryKindIsFollowed(t *testing.T) {
	for _, k := range lua.Kinds() {
		f, ok := followed[k.String()]
		if !ok || f.body == nil {
			t.Errorf("the model does not follow %s: add its body and pin to followed", k)
		}
	}
}
