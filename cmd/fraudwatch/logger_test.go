package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Durations read as "2s" in both log formats, nested in groups too, not as
// JSON's nanoseconds (README, Running it for real).
func TestLoggerWritesDurationsAsText(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := (&logFlags{level: "info", format: format}).logger(&buf)
			if err != nil {
				t.Fatal(err)
			}
			l.Info("retrying", slog.Duration("retry_in", 2*time.Second),
				slog.Group("batch", slog.Duration("took", 1500*time.Millisecond)), slog.Int("attempt", 3))
			line := buf.String()
			if format == "text" {
				for _, want := range []string{"retry_in=2s", "batch.took=1.5s", "attempt=3"} {
					if !strings.Contains(line, want) {
						t.Errorf("%q lacks %s", line, want)
					}
				}
				return
			}
			var got struct {
				RetryIn any `json:"retry_in"`
				Batch   struct {
					Took any `json:"took"`
				} `json:"batch"`
				Attempt any `json:"attempt"`
			}
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if got.RetryIn != "2s" || got.Batch.Took != "1.5s" || got.Attempt != float64(3) {
				t.Errorf("%q: retry_in %v, batch.took %v, attempt %v; want \"2s\", \"1.5s\" and the number 3", line, got.RetryIn, got.Batch.Took, got.Attempt)
			}
		})
	}
}
