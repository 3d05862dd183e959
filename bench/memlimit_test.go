package main

import (
	"flag"
	"io"
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// -gomemlimit's default is the GOMEMLIMIT the Kubernetes Deployment sets on
// its fraudwatch container, so that the bench measures the processes as
// they are deployed, and the two cannot drift apart.
func TestGOMEMLIMITIsTheKits(t *testing.T) {
	data, err := os.ReadFile("../deploy/kubernetes/base/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string
						Env  []struct{ Name, Value string }
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	kit := ""
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if c.Name == "fraudwatch" && e.Name == "GOMEMLIMIT" {
				kit = e.Value
			}
		}
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var v string
	memLimitFlag(fs, &v)
	if def := fs.Lookup("gomemlimit").DefValue; kit == "" || def != kit {
		t.Errorf("-gomemlimit defaults to %q, the Deployment's fraudwatch container sets GOMEMLIMIT %q: want the kit's", def, kit)
	}
	if _, err := memLimitNote(kit); err != nil {
		t.Error(err)
	}
}

// A replica's environment: the inherited GOMEMLIMIT replaced, once; a
// value the runtime would refuse is refused before any process starts.
func TestMemLimitEnv(t *testing.T) {
	for _, tc := range []struct{ environ, want []string }{
		{[]string{"HOME=/h", "GOMEMLIMIT=1GiB", "GOMEMLIMIT_X=1"}, []string{"HOME=/h", "GOMEMLIMIT_X=1", "GOMEMLIMIT=100MiB"}},
		{[]string{"HOME=/h"}, []string{"HOME=/h", "GOMEMLIMIT=100MiB"}},
		{nil, []string{"GOMEMLIMIT=100MiB"}},
	} {
		if got := withEnv(tc.environ, "GOMEMLIMIT", "100MiB"); !slices.Equal(got, tc.want) {
			t.Errorf("withEnv(%q) = %q, want %q", tc.environ, got, tc.want)
		}
	}
	for _, v := range []string{"100MiB", "4096", "4096B", "2GiB", "off"} {
		if _, err := memLimitNote(v); err != nil {
			t.Errorf("-gomemlimit %q: %v", v, err)
		}
	}
	for _, v := range []string{"100MB", "100Mi", "100 MiB", "1.5GiB", "-1MiB", "MiB"} {
		if _, err := memLimitNote(v); err == nil {
			t.Errorf("-gomemlimit %q taken, which the Go runtime refuses", v)
		}
	}
}
