package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// parse parses a command's flags, wherever they stand, and refuses any
// other argument; it returns false (and the exit code) when the command
// should stop.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	_, code, ok := parseArgs(fs, args, 0, stderr)
	return code, ok
}

// parseArgs parses a command's flags and returns its other arguments, at
// most maxArgs of them. Flags may come before, between and after the
// arguments (`silence expire --config F ID --author lee`): Go's flag
// package stops at the first argument, so parsing goes on after it, one
// argument at a time. "--" ends the flags: what follows it is arguments,
// also when it starts with "-".
func parseArgs(fs *flag.FlagSet, args []string, maxArgs int, stderr io.Writer) ([]string, int, bool) {
	fs.SetOutput(stderr)
	rest, err := interleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK, false
		}
		return nil, exitUsage, false
	}
	if len(rest) > maxArgs {
		fmt.Fprintf(stderr, "fraudwatch %s: unexpected arguments: %s\n", fs.Name(), strings.Join(rest[maxArgs:], " "))
		return nil, exitUsage, false
	}
	return rest, 0, true
}

// interleaved parses the flags among args and returns the other arguments
// in their order.
func interleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			return rest, nil
		}
		if endedFlags(fs, args[:len(args)-len(left)]) {
			return append(rest, left...), nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// endedFlags says whether parsing the flags parsed stopped at the
// terminator "--", rather than at an argument: parsed ends with "--" then,
// but so does `--reason --`, where "--" is the value of a flag. So the
// flags are walked as the flag package walks them.
func endedFlags(fs *flag.FlagSet, parsed []string) bool {
	for i := 0; i < len(parsed); i++ {
		if parsed[i] == "--" {
			return true
		}
		name := strings.TrimPrefix(strings.TrimPrefix(parsed[i], "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) {
			i++ // its value
		}
	}
	return false
}

// isBoolFlag says whether f takes no value (--dry-run), as the flag
// package decides it.
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
