package main

import "testing"

// The profile row's figure per window change: µs of script per event over
// the four rules' window changes per event, against the seed-style
// script's µs a call side by side.
func TestPerChange(t *testing.T) {
	p := redisProfile{scripts: 39}
	for _, tc := range []struct {
		name  string
		rules string
		seed  float64
		want  string
	}{
		{"side by side", "", 5, "; 10.0 µs of script per window change (3.90 changes an event), 2.00 × the seed-style script's 5.0 µs a call (a, side by side)"},
		{"not side by side", "", 0, "; 10.0 µs of script per window change (3.90 changes an event)"},
		{"another rules file", "rules.yaml", 5, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &bench{o: options{events: 1000, rules: tc.rules}, seedPerCall: tc.seed}
			if got := b.perChange(p, 3900); got != tc.want {
				t.Errorf("perChange = %q, want %q", got, tc.want)
			}
		})
	}
}
