package main

import "testing"

// A row against the first with each ÷ the ceiling right after it: a spell
// that slows a row and its ceiling alike drops out.
func TestNormalised(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		rate, ceil, first, firstCeil float64
		want                         float64
	}{
		{"as fast, same ceilings", 50_000, 200_000, 50_000, 200_000, 1},
		{"a slow spell over the row and its ceiling", 35_000, 140_000, 50_000, 200_000, 1},
		{"a slow spell over the first row and its ceiling", 50_000, 200_000, 35_000, 140_000, 1},
		{"slower on the same ceilings", 40_000, 200_000, 50_000, 200_000, 0.8},
		{"a row's ceiling not measured", 40_000, 0, 50_000, 200_000, 0},
		{"the first row's ceiling not measured", 40_000, 200_000, 50_000, 0, 0},
		{"no first row", 40_000, 200_000, 0, 200_000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := normalised(tc.rate, tc.ceil, tc.first, tc.firstCeil); got < tc.want-1e-9 || got > tc.want+1e-9 {
				t.Errorf("normalised = %v, want %v", got, tc.want)
			}
		})
	}
}

// The notes the adjacent ceilings add to (b)'s rows, and none when
// -ceiling-for 0 measured none.
func TestAdjacentNotes(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"the first row", afterNote(40_000, 200_000, 160_000, "(a)'s"),
			"; 1.00 × the seed-style ceiling ÷ 4 measured right after it (160000 calls/s, -20 % from (a)'s), 0.89 × the mean of the two ceilings ÷ 4"},
		{"a faster ceiling after", afterNote(50_000, 200_000, 220_000, "the one before it"),
			"; 0.91 × the seed-style ceiling ÷ 4 measured right after it (220000 calls/s, +10 % from the one before it), 0.95 × the mean of the two ceilings ÷ 4"},
		{"no ceiling after", afterNote(40_000, 200_000, 0, "(a)'s"), ""},
		{"no ceiling before", afterNote(40_000, 0, 160_000, "(a)'s"), ""},
		{"a windows row", vsFirstNote(30_000, 150_000, 50_000, 200_000, 200_000),
			", 0.80 × with each ÷ the seed-style ceiling measured right after it (150000 calls/s after this row, -25 % from (a)'s)"},
		{"a windows row, no ceilings", vsFirstNote(30_000, 0, 50_000, 0, 0), ""},
		{"a windows row, no (a)", vsFirstNote(30_000, 150_000, 50_000, 200_000, 0), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}
