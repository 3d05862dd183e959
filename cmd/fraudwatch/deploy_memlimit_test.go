package main

import (
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// GOMEMLIMIT, Go's soft memory limit, is one setting of the kit
// (docs/operations.md, Memory): the Deployment's container sets it, in the
// runtime's syntax, to at most 80 % of its memory limit (the rest is room
// for what the collector has not collected yet and for memory outside the
// heap), and compose.yaml's replicas set the same value.
func TestGOMEMLIMIT(t *testing.T) {
	_, list := loadKustomization(t, kubeBase)
	c := baseDeployment(t, byKind(t, list)).Template.Spec.Containers[0]
	var value string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			value = e.Value
		}
	}
	soft, ok := memLimitBytes(value)
	if !ok {
		t.Fatalf("the Deployment's GOMEMLIMIT is %q, want a limit in the Go runtime's syntax, such as 100MiB (docs/operations.md, Memory)", value)
	}
	// Kubernetes's binary units are the runtime's, less the B.
	limit, ok := memLimitBytes(c.Resources.Limits["memory"] + "B")
	if !ok {
		t.Fatalf("the Deployment's memory limit %q, want a figure in Ki, Mi, Gi or Ti", c.Resources.Limits["memory"])
	}
	if soft > limit/5*4 {
		t.Errorf("the Deployment's GOMEMLIMIT %s is over 80 %% of its memory limit %s: the container could be OOM-killed for garbage not yet collected",
			value, c.Resources.Limits["memory"])
	}
	var compose struct {
		Services map[string]struct{ Environment map[string]string }
	}
	readYAML(t, filepath.Join(deployDir, "compose.yaml"), &compose)
	replicas := 0
	for name, s := range compose.Services {
		if strings.HasPrefix(name, "fraudwatch-") {
			replicas++
			if got := s.Environment["GOMEMLIMIT"]; got != value {
				t.Errorf("compose.yaml's %s has GOMEMLIMIT %q, the Deployment %q: one setting, one value", name, got, value)
			}
		}
	}
	if replicas == 0 {
		t.Error("compose.yaml has no fraudwatch-N replica")
	}
}

// memLimitBytes parses a GOMEMLIMIT as the Go runtime does: a non-negative
// integer of bytes, alone or with a unit, B, KiB, MiB, GiB or TiB. "off",
// no limit, is not one here.
func memLimitBytes(s string) (int64, bool) {
	shift := 0
	for _, u := range []struct {
		unit  string
		shift int
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}} {
		if n, ok := strings.CutSuffix(s, u.unit); ok {
			s, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64>>shift {
		return 0, false
	}
	return n << shift, true
}

func TestMemLimitBytes(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int64 // -1: refused
	}{
		{"100MiB", 100 << 20}, {"256MiB", 256 << 20}, {"512KiB", 512 << 10}, {"2GiB", 2 << 30}, {"1TiB", 1 << 40},
		{"4096B", 4096}, {"4096", 4096}, {"0", 0},
		{"", -1}, {"off", -1}, {"MiB", -1}, {"100MB", -1}, {"100M", -1}, {"100Mi", -1}, {"100mib", -1},
		{"100 MiB", -1}, {"1.5GiB", -1}, {"-1MiB", -1}, {"100iB", -1}, {"9000000TiB", -1},
	} {
		got, ok := memLimitBytes(tc.s)
		if !ok {
			got = -1
		}
		if got != tc.want {
			t.Errorf("memLimitBytes(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}
