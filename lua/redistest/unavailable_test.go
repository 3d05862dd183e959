package redistest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recordingTB records how a test would end, without ending this one: the
// first of Fatalf and Skipf, either of which would end it.
type recordingTB struct {
	testing.TB
	ended string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, a ...any) { r.end("failed: " + fmt.Sprintf(format, a...)) }

func (r *recordingTB) Skipf(format string, a ...any) { r.end("skipped: " + fmt.Sprintf(format, a...)) }

func (r *recordingTB) end(how string) {
	if r.ended == "" {
		r.ended = how
	}
}

// Without a Redis a test skips on a developer's machine, and fails under
// CI, where a skipped suite would pass for nothing (CONTRIBUTING.md).
func TestNoRedisFailsUnderCI(t *testing.T) {
	for _, tt := range []struct {
		ci   string
		want string
	}{
		{"", "skipped"},
		{"true", "failed"},
	} {
		t.Setenv("CI", tt.ci)
		r := &recordingTB{TB: t}
		unavailable(r, errors.New("connection refused"))
		if !strings.HasPrefix(r.ended, tt.want) {
			t.Errorf("CI=%q: the test %q, want %s", tt.ci, r.ended, tt.want)
		}
	}
}
