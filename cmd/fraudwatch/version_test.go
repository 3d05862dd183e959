package main

import (
	"runtime/debug"
	"testing"
)

// fraudwatch version: -ldflags win; else what go build stamped (README,
// Running it for real); else dev and unknown.
func TestBuildVersion(t *testing.T) {
	stamped := func(version string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/fraudwatch/fraudwatch", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	const pseudo, rev = "v0.0.0-20261203020608-a8735eb31572", "a8735eb315727fc0271465c7a0cf173184a1bac2"
	tests := []struct {
		name                  string
		ldVersion, ldCommit   string
		info                  *debug.BuildInfo
		wantVersion, wantComm string
	}{
		{"ldflags win", "v1.2.0", "0123abc", stamped(pseudo, "vcs.revision", rev, "vcs.modified", "true"), "v1.2.0", "0123abc"},
		{"go build in a clean checkout", "", "", stamped(pseudo, "vcs.revision", rev, "vcs.modified", "false"), pseudo, rev},
		{"go build with uncommitted changes", "", "", stamped(pseudo+"+dirty", "vcs.revision", rev, "vcs.modified", "true"), pseudo + "+dirty", rev + "-dirty"},
		{"ldflags version only", "v1.2.0", "", stamped(pseudo, "vcs.revision", rev), "v1.2.0", rev},
		{"ldflags commit only", "", "0123abc", stamped(pseudo, "vcs.revision", rev, "vcs.modified", "true"), pseudo, "0123abc"},
		{"-buildvcs=false", "", "", stamped("(devel)", "-compiler", "gc"), "dev", "unknown"},
		{"no build information", "", "", nil, "dev", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, c := buildVersion(tt.ldVersion, tt.ldCommit, tt.info)
			if v != tt.wantVersion || c != tt.wantComm {
				t.Errorf("buildVersion = %q, %q; want %q, %q", v, c, tt.wantVersion, tt.wantComm)
			}
		})
	}
}
