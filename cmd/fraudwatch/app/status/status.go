// Package status serves fraudwatch's read-only status page: the rules in
// force, their version and their where: conditions, what the last reading
// of the rules file came to, the alerts this process settled last, the
// open alerts of every replica (per rule, and the newest), each rule's
// quality by the outcomes of its alerts (7 and 30 days), the silences
// that run, and the lag of the partitions it holds.
//
// The page is rendered on the server with html/template (every value
// escaped) and has no script. It names a group's fields but never their
// values, which are personal data: it is served on the metrics listener,
// where a scraper is not expected to see an email or a card.
package status

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Source is what the page shows, read at each request.
type Source interface {
	// Rules are the rules in force and their version (rules.Version).
	Rules() (version string, rs []rules.Rule)
	// Recent are the alerts this process settled last, newest first.
	Recent() []dispatch.Settled
	// Silences lists the silences that run.
	Silences(ctx context.Context) ([]silence.Silence, error)
	// Lag is the lag of each partition this process holds.
	Lag() []Lag
	// Reload is what the last reading of the rules file came to.
	Reload() Reload
	// Open is the alerts sent and not resolved, of every replica.
	Open(ctx context.Context) (Open, error)
	// Quality is each rule's alerts judged by their outcomes over each
	// of QualityPeriods up to now, of every replica.
	Quality(ctx context.Context, now time.Time) ([]outcome.RuleQuality, error)
}

// QualityPeriods are the periods the page judges each rule over.
var QualityPeriods = []time.Duration{7 * 24 * time.Hour, 30 * 24 * time.Hour}

// Quality is one rule's row of the quality table: its figures over each
// of QualityPeriods, in their order.
type Quality struct {
	Rule string
	By   []outcome.RuleQuality
}

// qualityRows sets the figures out a rule a row, rules in name order.
func qualityRows(qs []outcome.RuleQuality) []Quality {
	byRule := map[string][]outcome.RuleQuality{}
	for _, q := range qs {
		byRule[q.Rule] = append(byRule[q.Rule], q)
	}
	var rows []Quality
	for _, rule := range slices.Sorted(maps.Keys(byRule)) {
		by := make([]outcome.RuleQuality, len(QualityPeriods))
		for _, q := range byRule[rule] {
			if i := slices.Index(QualityPeriods, q.Period); i >= 0 {
				by[i] = q
			}
		}
		rows = append(rows, Quality{Rule: rule, By: by})
	}
	return rows
}

// Open is the open alerts (open or acknowledged): how many each rule has,
// and the newest of them.
type Open struct {
	ByRule map[string]int
	Newest []life.Entry
	// Acks are each rule's open alerts by acknowledgement (AcksOf).
	Acks map[string]Acks
}

// Rules are the rules with open alerts, by name.
func (o Open) Rules() []string { return slices.Sorted(maps.Keys(o.ByRule)) }

// Reload is what the last reading of the rules file came to, as the
// reloader records it.
type Reload struct {
	// File is the rules file; "" when the rules were not read from one,
	// and nothing reloads them.
	File string
	// At is when the file was last read, and Why what prompted it: start,
	// signal or file changed.
	At  time.Time
	Why string
	// Result is the reading's result, as fraudwatch_rules_reloads_total
	// counts it: ok, unchanged, invalid or unreadable.
	Result string
	// Err says why the reading was refused; "" unless it was.
	Err string
	// Since is when the rules in force were put in force.
	Since time.Time
}

// Refused says whether the last reading was refused: the rules in force
// are older than the file.
func (r Reload) Refused() bool { return r.Err != "" }

// maxErr bounds the error the page shows: a YAML error can quote the file,
// which may be long. The log has the whole of it.
const maxErr = 2000

// clip cuts s to maxErr bytes, on a character's boundary, and says so.
func clip(s string) string {
	if len(s) <= maxErr {
		return s
	}
	cut := maxErr
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" … (%d more bytes: the log has the whole error)", len(s)-cut)
}

// Lag is one partition's lag.
type Lag struct {
	Topic     string
	Partition int
	Messages  float64
}

//go:embed page.html
var pageHTML string

var page = template.Must(template.New("status").Funcs(template.FuncMap{
	"value":  alert.FormatValue,
	"time":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"dur":    alert.FormatDuration,
	"join":   strings.Join,
	"fields": func(m map[string]string) string { return strings.Join(slices.Sorted(maps.Keys(m)), ", ") },
	"where":  config.WhereSummary, // as check's table shows it
	"clip":   clip,
	"pct": func(p *float64) string {
		if p == nil {
			return "–"
		}
		return fmt.Sprintf("%.0f%%", *p*100)
	},
}).Parse(pageHTML))

// view is what the template renders.
type view struct {
	Now         time.Time
	Version     string
	Rules       []rules.Rule
	Reload      Reload
	Recent      []dispatch.Settled
	Silences    []silence.Silence
	SilencesErr string
	Open        Open
	OpenErr     string
	Quality     []Quality
	QualityErr  string
	// QualityPeriods heads the quality table's columns.
	QualityPeriods []time.Duration
	Lag            []Lag
}

// readTimeout bounds each of the page's sections read from Redis (the
// silences, the open alerts, the outcomes) on its own: a slow read blanks
// its own section, not those read after it.
const readTimeout = 2 * time.Second

// Handler serves the page at GET /.
func Handler(src Source, log *slog.Logger) http.Handler { return handler(src, log, readTimeout) }

// within reads one section with its own deadline of timeout.
func within[T any](r *http.Request, timeout time.Duration, read func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	return read(ctx)
}

func handler(src Source, log *slog.Logger, timeout time.Duration) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		v := view{Now: time.Now()}
		v.Version, v.Rules = src.Rules()
		v.Reload = src.Reload()
		v.Recent = src.Recent()
		sils, err := within(r, timeout, src.Silences)
		if err != nil {
			// The rest of the page still helps; say what is missing.
			v.SilencesErr = "silences could not be read from Redis"
			log.Warn("status page: listing silences failed", "err", err)
		}
		v.Silences = sils
		if v.Open, err = within(r, timeout, src.Open); err != nil {
			v.OpenErr = "open alerts could not be read from Redis"
			log.Warn("status page: listing open alerts failed", "err", err)
		}
		qs, err := within(r, timeout, func(ctx context.Context) ([]outcome.RuleQuality, error) { return src.Quality(ctx, v.Now) })
		if err != nil {
			v.QualityErr = "the rules' outcomes could not be read from Redis"
			log.Warn("status page: reading the rules' outcomes failed", "err", err)
		}
		v.Quality, v.QualityPeriods = qualityRows(qs), QualityPeriods
		v.Lag = src.Lag()
		slices.SortFunc(v.Lag, func(a, b Lag) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		// Nothing on the page runs or loads anything. Added to the server's
		// policy, which forbids framing it, not in its place.
		w.Header().Add("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		if err := page.Execute(w, v); err != nil {
			log.Warn("status page: render failed", "err", err)
		}
	})
}
