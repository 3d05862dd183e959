package main

import "testing"

func TestStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name      string
		line      string
		busy, all float64
		err       bool
	}{
		{"a kernel's ten fields", "cpu  100 5 50 800 20 3 2 7 40 1", 160, 980, false},
		{"no guest fields", "cpu 100 5 50 800 20 3 2 7", 160, 980, false},
		{"an older kernel's seven", "cpu 100 5 50 800 20 3 2", 160, 980, false},
		{"one core's line", "cpu0 100 5 50 800 20 3 2 7", 0, 0, true},
		{"too short", "cpu 100 5 50 800", 0, 0, true},
		{"not a number", "cpu 100 x 50 800 20 3 2 7", 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			busy, all, err := statCPU(tc.line)
			if (err != nil) != tc.err || busy != tc.busy || all != tc.all {
				t.Errorf("statCPU(%q) = %v, %v, %v; want %v, %v, error %v", tc.line, busy, all, err, tc.busy, tc.all, tc.err)
			}
		})
	}
}
