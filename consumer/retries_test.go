package consumer

import (
	"strconv"
	"testing"
)

// A step is Seen (id, offset, whether a retry is wanted) followed by a
// Commit, unless then says otherwise: "pending" (neither) or "discard".
type step struct {
	id     string
	offset int64
	retry  bool
	then   string
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name   string
		window int
		steps  []step
	}{
		{"a retry within the window", 4, []step{
			{"a", 0, false, ""}, {"b", 1, false, ""}, {"a", 2, true, ""}, {"c", 3, false, ""},
		}},
		{"the window's oldest offset is in it", 2, []step{
			{"a", 0, false, ""}, {"b", 1, false, ""}, {"a", 2, true, ""},
		}},
		{"beyond the window, not caught", 2, []step{
			{"a", 0, false, ""}, {"b", 1, false, ""}, {"c", 2, false, ""}, {"a", 3, false, ""},
		}},
		{"offsets skipped count in the window", 3, []step{
			{"a", 0, false, ""}, {"b", 2, false, ""}, {"a", 4, false, ""}, {"b", 5, true, ""},
		}},
		{"the same record again at its offset is not a retry", 4, []step{
			{"a", 0, false, ""}, {"b", 1, false, ""}, {"a", 0, false, ""}, {"b", 1, false, ""}, {"a", 2, true, ""},
		}},
		{"a failed attempt made again finds what it found", 4, []step{
			{"x", 0, false, ""},
			{"a", 1, false, "pending"}, {"b", 2, false, "pending"}, {"a", 3, true, "discard"},
			{"a", 1, false, "pending"}, {"b", 2, false, "pending"}, {"a", 3, true, ""},
			{"b", 4, true, ""},
		}},
		{"a discarded record is forgotten", 4, []step{
			{"n", 1, false, "discard"}, {"m", 1, false, ""}, {"n", 5, false, ""},
		}},
		{"a discarded record leaves its id where it was", 4, []step{
			{"a", 0, false, ""}, {"a", 2, true, "discard"}, {"b", 2, false, ""}, {"a", 3, true, ""},
		}},
		{"a discarded record leaves its id no later", 4, []step{
			{"a", 0, false, ""}, {"a", 2, true, "discard"}, {"b", 2, false, ""}, {"a", 6, false, ""},
		}},
		{"a batch seen again within its attempt is not a retry", 4, []step{
			{"a", 1, false, "pending"}, {"a", 1, false, "pending"}, {"a", 2, true, ""},
		}},
		{"window 0 is off", 0, []step{
			{"a", 0, false, ""}, {"a", 1, false, ""}, {"a", 1, false, ""},
		}},
		{"eviction is oldest first", 3, []step{
			{"a", 0, false, ""}, {"b", 1, false, ""}, {"c", 2, false, ""},
			// d evicts a, the oldest, and neither b nor c.
			{"d", 3, false, ""}, {"b", 4, true, ""}, {"c", 5, true, ""}, {"a", 6, false, ""},
		}},
		{"an id seen again outlives its first record", 3, []step{
			{"a", 0, false, ""}, {"a", 2, true, ""}, {"b", 3, false, ""}, {"c", 4, false, ""},
			// a's first record has left the window and the ring; its
			// second, at 2, has not.
			{"a", 5, true, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRetries(tt.window)
			for i, s := range tt.steps {
				if got := r.Seen(s.id, s.offset); got != s.retry {
					t.Fatalf("step %d, %s at %d: retry = %v, want %v", i, s.id, s.offset, got, s.retry)
				}
				switch s.then {
				case "":
					r.Commit()
				case "discard":
					r.Discard()
				}
			}
		})
	}
}

// The memory holds at most the window's records, however many pass.
func TestRetriesAreBounded(t *testing.T) {
	r := NewRetries(100)
	for off := range int64(10_000) {
		if r.Seen("id-"+strconv.FormatInt(off, 10), off) {
			t.Fatalf("distinct id at %d taken for a retry", off)
		}
		r.Commit()
	}
	if r.Len() != 100 || len(r.ids) != 100 {
		t.Fatalf("holds %d records, %d ids; want 100 of each", r.Len(), len(r.ids))
	}
	var none *Retries
	if none.Seen("a", 1) || none.Len() != 0 {
		t.Fatal("a nil memory reports something")
	}
	none.Commit()
	none.Discard()
}
