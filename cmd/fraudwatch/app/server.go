package app

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app/status"
)

// Timeouts of every HTTP server fraudwatch runs. Without them a client
// that sends its request slowly, or never reads the answer, or keeps an
// idle connection, holds a connection and a goroutine for as long as it
// likes; a few thousand such clients exhaust the process.
const (
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	// httpWriteTimeout bounds a whole answer: a scrape of /metrics, a
	// /readyz (whose checks take at most a second each).
	httpWriteTimeout = 30 * time.Second
	httpIdleTimeout  = 2 * time.Minute
)

// newHTTPServer is the one way fraudwatch makes an HTTP server: serving
// h, with every timeout set, and no answer a browser will frame.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           noFraming(h),
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
	}
}

// noFraming forbids every browser to show h's answers in a frame of another
// page (clickjacking): the status page, a 404, a Slack click's answer all
// render in a browser. frame-ancestors is the standard, X-Frame-Options is
// for browsers that predate it. A handler that sets a policy of its own
// adds it (Header.Add): a browser enforces every policy it is sent.
func noFraming(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		h.ServeHTTP(w, r)
	})
}

// newServer serves /metrics, /healthz, /readyz (docs/operations.md, Metrics
// and health) and the status page at /.
func newServer(a *App) (*http.Server, error) {
	src, err := newStatusSource(a)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", status.Handler(src, a.log.With("component", "status")))
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	if a.cfg.Metrics.Pprof {
		servePprof(mux)
	}
	return newHTTPServer(mux), nil
}

// servePprof adds Go's profiles under /debug/pprof/ (metrics.pprof):
// the index, the named profiles (heap, goroutine, allocs, block, mutex,
// threadcreate), a CPU profile (?seconds=, 30 by default) and an
// execution trace. The CPU profile and trace extend the server's write
// timeout by their duration themselves.
func servePprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// readyProbeTTL is how long the key of /readyz's write probe lives: it
// needs none, and expires on its own.
const readyProbeTTL = 5 * time.Second

// readyz answers 200 only when Redis answers and takes writes, and both
// groups hold their assignments; otherwise 503 with the reasons.
func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	var problems []string
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if err := a.rdb.Ping(ctx).Err(); err != nil {
		// The addresses hold no credentials: config refuses user:pass@.
		problems = append(problems, fmt.Sprintf("redis at %s: not answering: %v", strings.Join(a.cfg.Redis.Addrs, ", "), err))
	} else if err := a.rdb.Set(ctx, a.cfg.Redis.KeyPrefix+":readyz", "1", readyProbeTTL).Err(); err != nil {
		// A full Redis under noeviction still answers PING, and refuses
		// every script that counts: only a write shows it.
		problems = append(problems, redisWriteProblem(err))
	}
	if !a.events.Ready() {
		problems = append(problems, "kafka events group: "+a.events.Status())
	}
	if ok, why := a.alertsReady(); !ok {
		problems = append(problems, why)
	}
	if len(problems) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		for _, p := range problems {
			_, _ = fmt.Fprintln(w, p)
		}
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// redisWriteProblem says why Redis refused /readyz's write probe.
func redisWriteProblem(err error) string {
	if strings.HasPrefix(err.Error(), "OOM ") {
		return "redis: out of memory (used memory above maxmemory): writes refused, events and alerts wait"
	}
	return "redis: write refused: " + err.Error()
}
