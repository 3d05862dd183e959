package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

func versionString() string {
	info, _ := debug.ReadBuildInfo()
	v, c := buildVersion(version, commit, info)
	return fmt.Sprintf("fraudwatch %s (commit %s, %s %s/%s)", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// buildVersion is the version and commit to report: those -ldflags set (the
// image's build) win; else what the go command stamped into the binary in a
// git checkout (go version -m: the module's pseudo-version, vcs.revision,
// and vcs.modified for uncommitted changes); else dev and unknown.
func buildVersion(ldVersion, ldCommit string, info *debug.BuildInfo) (v, c string) {
	v, c = ldVersion, ldCommit
	if info != nil {
		if v == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		rev, modified := "", false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if c == "" && rev != "" {
			c = rev
			if modified {
				c += "-dirty"
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	if c == "" {
		c = "unknown"
	}
	return v, c
}
