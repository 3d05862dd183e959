package alert

import "time"

// FormatValue renders a rule's counter or threshold for people, as the Slack
// message does: amounts as money in their currency ("KRW 1,250,000",
// "USD 12.50"), counts as grouped integers ("1,234"). The result is plain
// text, not escaped for Slack.
func FormatValue(metric string, v int64, currency string) string {
	return formatValue(metric, v, currency)
}

// FormatDuration renders a window or cooldown the way rules write it: "10m"
// rather than "10m0s".
func FormatDuration(d time.Duration) string { return formatDuration(d) }
