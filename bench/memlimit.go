package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// kitGOMEMLIMIT is the deploy kit's GOMEMLIMIT, Go's soft memory limit
// (deploy/kubernetes/base/deployment.yaml, docs/operations.md, Memory): the
// fraudwatch run processes the bench starts, replicas as deployed, run with
// it, so that their peak RSS is a deployed replica's; its backtests, one-shot
// commands whose heap is the whole history, run as the environment has them.
// TestGOMEMLIMITIsTheKits holds the two together.
const kitGOMEMLIMIT = "100MiB"

// memLimitFlag defines -gomemlimit on fs.
func memLimitFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "gomemlimit", kitGOMEMLIMIT, `GOMEMLIMIT, the Go runtime's soft memory limit, of the fraudwatch run processes the bench starts (not of its backtests): the deploy kit's by default (docs/operations.md, Memory); "": the environment's, as it is`)
}

// memLimitSyntax is what the Go runtime takes: bytes, alone or with a
// binary unit, or off.
var memLimitSyntax = regexp.MustCompile(`^(\+?[0-9]+(B|KiB|MiB|GiB|TiB)?|off)$`)

// memLimitNote is what the Machine line says of -gomemlimit, or why v is
// refused: a value the runtime refuses would stop every fraudwatch process
// at its start.
func memLimitNote(v string) (string, error) {
	switch inherited := os.Getenv("GOMEMLIMIT"); {
	case v == "" && inherited == "":
		return "; fraudwatch run without GOMEMLIMIT", nil
	case v == "":
		return "; fraudwatch run with GOMEMLIMIT=" + inherited + " (the environment's)", nil
	case !memLimitSyntax.MatchString(v):
		return "", fmt.Errorf("-gomemlimit %q: want bytes with an optional unit, B, KiB, MiB, GiB or TiB, as GOMEMLIMIT takes them, or off", v)
	}
	return "; fraudwatch run with GOMEMLIMIT=" + v, nil
}

// withEnv is environ with name=value in place of any value of name it had.
func withEnv(environ []string, name, value string) []string {
	out := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	return append(out, name+"="+value)
}
