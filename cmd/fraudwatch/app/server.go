package app

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newServer serves /metrics, /healthz and /readyz (README, Metrics and
// health).
func newServer(a *App) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}

// readyz answers 200 only when Redis answers and both groups hold their
// assignments; otherwise 503 with the reasons.
func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	var problems []string
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if err := a.rdb.Ping(ctx).Err(); err != nil {
		problems = append(problems, "redis: not answering")
	}
	if !a.events.Ready() {
		problems = append(problems, "kafka events group: "+a.events.Status())
	}
	if !a.alerts.Ready() {
		problems = append(problems, "kafka alerts group: "+a.alerts.Status())
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
