// Package rules holds the velocity rules (Rule; package config reads them
// from their file and checks them) and the Engine that evaluates every
// event against them through the Redis scripts of package lua, handing
// first crossings on as alerts.
package rules

import (
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Rule is one velocity rule, with its defaults applied. Its metric, severity
// and mode are the alert model's words (package alert): its alerts carry
// them.
type Rule struct {
	Name        string
	Description string
	Metric      alert.Metric
	GroupBy     []string
	Window      time.Duration
	Threshold   int64
	// Cooldown is how long after an alert the same (rule, group) stays
	// quiet. 0 disables it.
	Cooldown time.Duration
	Severity alert.Severity
	Mode     alert.Mode
	// Channel overrides slack.channel in bot-token mode.
	Channel string
	Enabled bool
}

// MaxThreshold keeps thresholds exact in the scripts, whose numbers are
// doubles (2^53 - 1).
const MaxThreshold = 1<<53 - 1
