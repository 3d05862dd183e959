package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// Every HTTP server bounds each phase of a request, so that slow or idle
// clients cannot hold its connections open.
func TestHTTPServerTimeouts(t *testing.T) {
	// Both servers (metrics, Slack's interactions) are made by it.
	srv := newHTTPServer(http.NotFoundHandler())
	// docs/operations.md (Metrics and health): 5 s, 10 s, 30 s and 2 min.
	tests := []struct {
		name      string
		got, want time.Duration
	}{
		{"ReadHeaderTimeout", srv.ReadHeaderTimeout, 5 * time.Second},
		{"ReadTimeout", srv.ReadTimeout, 10 * time.Second},
		{"WriteTimeout", srv.WriteTimeout, 30 * time.Second},
		{"IdleTimeout", srv.IdleTimeout, 2 * time.Minute},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if srv.WriteTimeout <= time.Second {
		t.Errorf("WriteTimeout = %v: /readyz's checks take up to a second each", srv.WriteTimeout)
	}
}

func slogText(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// A Redis that would evict keys when full is a loud warning at start, as
// are insecure settings; a Redis that will not say is skipped quietly.
func TestStartWarnings(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		mutate func(p *pipeline)
		want   []string
		absent []string
	}{
		{name: "noeviction", policy: "noeviction", absent: []string{"maxmemory_policy", "insecure setting"}},
		{name: "allkeys-lru", policy: "allkeys-lru",
			want: []string{`level=WARN msg="redis may evict fraudwatch's keys`, "maxmemory_policy=allkeys-lru"}},
		{name: "volatile-ttl", policy: "volatile-ttl", want: []string{"maxmemory_policy=volatile-ttl"}},
		{name: "insecure_skip_verify", policy: "noeviction",
			mutate: func(p *pipeline) { p.cfg.Redis.TLS.InsecureSkipVerify = true },
			want:   []string{`level=WARN msg="insecure setting" warning="redis.tls.insecure_skip_verify: true`},
			absent: []string{"maxmemory_policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPipeline(t, 1, countRule)
			srv := redistest.Start(t)
			if err := redistest.Connect(t, srv.Addr).ConfigSet(t.Context(), "maxmemory-policy", tt.policy).Err(); err != nil {
				t.Fatal(err)
			}
			p.cfg.Redis.Addrs, p.cfg.Redis.Cluster = []string{srv.Addr}, false // a private single Redis, to break
			if tt.mutate != nil {
				tt.mutate(p)
			}
			var logs testkit.Buffer
			opts := p.options()
			opts.Logger = slogText(&logs)
			r := p.startWith(opts)
			// The checks run before the groups start: once ready, they are
			// done.
			waitFor(t, 30*time.Second, "ready", func() bool { return r.ready(t) })
			out := logs.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("log lacks %q:\n%s", w, out)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(out, a) {
					t.Errorf("log has %q:\n%s", a, out)
				}
			}
		})
	}
}

func TestCheckEviction(t *testing.T) {
	srv := redistest.Start(t)
	admin := redistest.Connect(t, srv.Addr)
	// A user that may do anything but read or change the configuration,
	// as managed Redis services have it.
	if err := admin.Do(t.Context(), "ACL", "SETUSER", "noconfig", "on", ">pw", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		policy string
		user   string
		want   string // "" for no record
		level  string
	}{
		{name: "noeviction", policy: "noeviction"},
		{name: "allkeys-lru", policy: "allkeys-lru", want: "maxmemory_policy=allkeys-lru", level: "WARN"},
		{name: "volatile-lfu", policy: "volatile-lfu", want: "maxmemory_policy=volatile-lfu", level: "WARN"},
		{name: "CONFIG denied", policy: "allkeys-lru", user: "noconfig", want: "redis maxmemory-policy not checked", level: "DEBUG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := admin.ConfigSet(t.Context(), "maxmemory-policy", tt.policy).Err(); err != nil {
				t.Fatal(err)
			}
			opts := &redis.Options{Addr: srv.Addr, MaxRetries: -1}
			if tt.user != "" {
				opts.Username, opts.Password = tt.user, "pw"
			}
			rdb := redis.NewClient(opts)
			defer rdb.Close()
			var logs testkit.Buffer
			checkEviction(t.Context(), rdb, slogText(&logs))
			out := logs.String()
			switch {
			case tt.want == "" && out != "":
				t.Errorf("logged:\n%s\nwant nothing", out)
			case tt.want != "" && (!strings.Contains(out, tt.want) || !strings.Contains(out, "level="+tt.level)):
				t.Errorf("logged:\n%s\nwant %s with %q", out, tt.level, tt.want)
			}
		})
	}
}

// A full Redis under noeviction answers PING but refuses every write, and
// so every event: /readyz says so, and is ready again once Redis has room.
// In a cluster the probe's key's own master is the one that fills.
func TestReadyzReportsRedisOutOfMemory(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprint("cluster=", cluster), func(t *testing.T) {
			p := newPipeline(t, 1, countRule)
			probe := p.cfg.Redis.KeyPrefix + ":readyz"
			// A private Redis, to break; in a cluster, the master of the
			// probe's key, filled with keys of its slot.
			var rdb *redis.Client
			if cluster {
				c := redistest.StartCluster(t)
				p.cfg.Redis.Addrs, p.cfg.Redis.Cluster = c.Addrs, true
				m, err := c.Client(t).MasterForKey(t.Context(), probe)
				if err != nil {
					t.Fatal(err)
				}
				rdb = redistest.Connect(t, m.Options().Addr)
			} else {
				srv := redistest.Start(t)
				p.cfg.Redis.Addrs, p.cfg.Redis.Cluster = []string{srv.Addr}, false
				rdb = redistest.Connect(t, srv.Addr)
			}
			r := p.start()
			get := func() (int, string) {
				resp, err := http.Get("http://" + r.app.Addr() + "/readyz")
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}
			waitFor(t, 30*time.Second, "/readyz 200", func() bool { code, _ := get(); return code == http.StatusOK })

			// Full: more memory used than maxmemory allows, which a
			// noeviction Redis answers with OOM to every write.
			ctx := t.Context()
			used := usedMemory(ctx, t, rdb)
			if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used/2, 10)).Err(); err != nil {
				t.Fatal(err)
			}
			code, body := get()
			if code != http.StatusServiceUnavailable || !strings.Contains(body, "redis: out of memory") {
				t.Fatalf("/readyz with Redis full = %d %q, want 503 naming Redis's memory", code, body)
			}
			if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "/readyz 200 once Redis has room", func() bool { code, _ := get(); return code == http.StatusOK })
		})
	}
}

func usedMemory(ctx context.Context, t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no used_memory in INFO memory:\n%s", info)
	return 0
}

// On a Redis Cluster every master is checked: one that may evict is named
// (docs/operations.md, Metrics and health).
func TestCheckEvictionOnEveryMaster(t *testing.T) {
	c := redistest.StartCluster(t)
	masters, err := c.Masters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	evicting := masters[len(masters)-1]
	if err := redistest.Connect(t, evicting).ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	checkEviction(t.Context(), c.Client(t), slogText(&logs))
	out := logs.String()
	if strings.Count(out, "maxmemory_policy=") != 1 || !strings.Contains(out, "redis_addr="+evicting) {
		t.Errorf("logged:\n%s\nwant one warning, naming %s", out, evicting)
	}
}

// No answer of fraudwatch's HTTP servers may be framed by another page
// (clickjacking): every one, the status page's, the metrics server's
// others and its 404, and each of the Slack interactions listener's,
// forbids it in both the standard's words and the older browsers'.
func TestNoAnswerCanBeFramed(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	const secret = "test-signing-secret"
	p.cfg.Slack.SigningSecret, p.cfg.Slack.InteractionsListen = secret, "127.0.0.1:0"
	r := p.start()
	waitFor(t, 30*time.Second, "ready", func() bool { return r.ready(t) })
	metrics, clicks := "http://"+r.app.Addr(), "http://"+r.app.InteractionsAddr()
	// A signed interaction that is no button's: answered 200, acted on not.
	body, signedHeader := signed(secret, []byte(`{"type":"shortcut"}`), time.Now())
	tests := []struct {
		method, url string
		header      http.Header
		code        int
		policy      string // a policy of the handler's own, besides
	}{
		{"GET", metrics + "/", nil, 200, "default-src 'none'"},
		{"GET", metrics + "/metrics", nil, 200, ""},
		{"GET", metrics + "/healthz", nil, 200, ""},
		{"GET", metrics + "/readyz", nil, 200, ""},
		{"GET", metrics + "/nowhere", nil, 404, ""},
		{"POST", clicks + "/slack/interactions", signedHeader, 200, ""},
		{"POST", clicks + "/slack/interactions", nil, 401, ""},
		{"GET", clicks + "/slack/interactions", nil, 405, ""},
		{"GET", clicks + "/", nil, 404, ""},
	}
	for _, tt := range tests {
		req, err := http.NewRequestWithContext(t.Context(), tt.method, tt.url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if tt.header != nil {
			req.Header = tt.header.Clone()
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		csp := resp.Header.Values("Content-Security-Policy")
		if resp.StatusCode != tt.code || resp.Header.Get("X-Frame-Options") != "DENY" ||
			!slices.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s %s: %d, X-Frame-Options %q, Content-Security-Policy %q; want %d, DENY and frame-ancestors 'none'",
				tt.method, tt.url, resp.StatusCode, resp.Header.Get("X-Frame-Options"), csp, tt.code)
		}
		if tt.policy != "" && !slices.ContainsFunc(csp, func(p string) bool { return strings.Contains(p, tt.policy) }) {
			t.Errorf("%s %s: Content-Security-Policy %q lacks the handler's own %q", tt.method, tt.url, csp, tt.policy)
		}
	}
}

// Go's profiles are served on the metrics listener only when
// metrics.pprof is set: a CPU profile of the running process, the heap's.
func TestPprofOnlyWhenSet(t *testing.T) {
	get := func(url string) (int, []byte) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("pprof=", on), func(t *testing.T) {
			p := newPipeline(t, 1, countRule)
			p.cfg.Metrics.Pprof = on
			r := p.start()
			waitFor(t, 30*time.Second, "ready", func() bool { return r.ready(t) })
			base := "http://" + r.app.Addr() + "/debug/pprof/"
			code, body := get(base + "profile?seconds=1")
			if !on {
				if code != http.StatusNotFound {
					t.Fatalf("metrics.pprof off: GET /debug/pprof/profile answered %d, want 404", code)
				}
				return
			}
			// A CPU profile is gzipped protobuf.
			if code != http.StatusOK || len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
				t.Fatalf("GET /debug/pprof/profile: %d, %d bytes starting %q; want 200 and a gzipped profile", code, len(body), body[:min(len(body), 16)])
			}
			if code, body := get(base + "heap?debug=1"); code != http.StatusOK || !strings.Contains(string(body), "heap profile") {
				t.Fatalf("GET /debug/pprof/heap?debug=1: %d, %.80q", code, body)
			}
		})
	}
}
