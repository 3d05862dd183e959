package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app/status"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Results of a reload: the result label of fraudwatch_rules_reloads_total.
const (
	reloadOK         = "ok"         // a new set is in force
	reloadUnchanged  = "unchanged"  // the file holds the rules in force
	reloadInvalid    = "invalid"    // refused: the old set runs on
	reloadUnreadable = "unreadable" // the file could not be read: the old set runs on
)

// settle is how long the rules file must stay quiet before it is read:
// an editor's save or a ConfigMap's swap is several events in a row.
const settle = 100 * time.Millisecond

// ruleSetter takes a new rule set; the engine swaps it in between batches.
type ruleSetter interface {
	SetRules([]rules.Rule)
}

// alertRules takes the rules whose alerts the dispatcher delivers.
type alertRules interface {
	SetRules(map[string]dispatch.RuleSettings)
}

// alertSettings are the rules as the dispatcher takes them.
func alertSettings(rs []rules.Rule) map[string]dispatch.RuleSettings {
	m := make(map[string]dispatch.RuleSettings, len(rs))
	for _, r := range rs {
		m[r.Name] = dispatch.RuleSettings{
			Mode: r.Mode, Cooldown: r.Cooldown, Channel: r.Channel,
			Description: r.Description, Severity: r.Severity, Threshold: r.Threshold,
			Fingerprint: r.Fingerprint(), Metric: r.Metric, Field: r.Field, GroupBy: r.GroupBy,
			Window: r.Window, WindowType: r.WindowType,
		}
	}
	return m
}

// reloader keeps the rules in force in step with the rules file. The file
// is read again when it changes and on SIGHUP; a valid set other than the
// one in force is swapped in, an invalid one is refused, logged with its
// file, rule and field, and the old set runs on.
//
// The file is watched through its directory, not itself: an editor saves
// by writing a new file and renaming it over the old one, and a Kubernetes
// ConfigMap swaps the symlink "..data" in the directory, and neither
// changes the file a watch on it would follow.
type reloader struct {
	path   string
	engine ruleSetter
	alerts alertRules
	log    *slog.Logger

	reloads *prometheus.CounterVec
	version *prometheus.GaugeVec

	mu      sync.Mutex
	rules   []rules.Rule
	current string // version of rules
	// last is what the last reading came to: its one home, which the
	// status page reads (lastReading).
	last status.Reload

	w         *fsnotify.Watcher // nil until arm, or when it failed
	names     map[string]bool   // the file names whose events matter
	closeOnce sync.Once
}

func newReloader(path string, rs []rules.Rule, engine ruleSetter, alerts alertRules, log *slog.Logger, reg prometheus.Registerer) (*reloader, error) {
	now := time.Now()
	// The rules were read from the file just before, at start.
	r := &reloader{path: path, engine: engine, alerts: alerts, log: log, rules: rs, current: rules.Version(rs),
		last: status.Reload{File: path, At: now, Why: "start", Result: reloadOK, Since: now},
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_rules_reloads_total",
			Help: "Readings of the rules file after the start, by result: ok (a new set in force), unchanged, invalid or unreadable (the old set runs on).",
		}, []string{"result"}),
		version: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fraudwatch_rules_version",
			Help: "1 for the version (a hash) of the rule set in force.",
		}, []string{"version"}),
	}
	for _, res := range []string{reloadOK, reloadUnchanged, reloadInvalid, reloadUnreadable} {
		r.reloads.WithLabelValues(res)
	}
	r.version.WithLabelValues(r.current).Set(1)
	for _, c := range []prometheus.Collector{r.reloads, r.version} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("app: register reload metrics: %w", err)
		}
	}
	return r, nil
}

// inForce is the rule set in force.
func (r *reloader) inForce() []rules.Rule {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rules
}

// lastReading is what the last reading of the rules file came to.
func (r *reloader) lastReading() status.Reload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// reload reads the rules file and puts its rules in force if they are
// valid and new. why says what prompted it, for the log.
func (r *reloader) reload(why string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.read(why, true)
}

// read is reload's work; counted says whether a file that holds the rules
// in force counts as a reload. Each reading that counts logs one line with
// its outcome, so that the last line says what is in force.
func (r *reloader) read(why string, counted bool) string {
	data, err := os.ReadFile(r.path)
	if err != nil {
		return r.refuse(reloadUnreadable, "rules file unreadable; the rules in force run on", why, err)
	}
	set, err := config.ParseRuleSet(data, r.path)
	if err != nil {
		// The errors name the file, the rule and the field; never a value
		// from an event.
		return r.refuse(reloadInvalid, "rules file invalid; the rules in force run on", why, err)
	}
	rs := set.Rules
	v := rules.Version(rs)
	if v == r.current {
		if counted {
			r.log.Info("rules reloaded: no change"+r.recovery(), "file", r.path, "reason", why, "version", v)
			r.reloads.WithLabelValues(reloadUnchanged).Inc()
			// Its event_fields may be what changed.
			warnFields(r.log, config.FieldWarnings(r.path, rs, set.EventFields))
		}
		r.took(why, reloadUnchanged)
		return reloadUnchanged
	}
	changes := rules.Diff(r.rules, rs)
	// The dispatcher first: the engine's first alert of a new rule then
	// finds its rule there.
	r.alerts.SetRules(alertSettings(rs))
	r.engine.SetRules(rs)
	r.version.DeleteLabelValues(r.current)
	r.version.WithLabelValues(v).Set(1)
	r.log.Info("rules reloaded"+r.recovery(), "file", r.path, "reason", why, "version", v, "previous_version", r.current,
		"rules", len(rs), "changes", reloadChanges(changes))
	warnFields(r.log, config.FieldWarnings(r.path, rs, set.EventFields))
	r.rules, r.current = rs, v
	r.reloads.WithLabelValues(reloadOK).Inc()
	r.took(why, reloadOK)
	return reloadOK
}

// took records a reading whose rules are in force, which ends a refusal.
func (r *reloader) took(why, result string) {
	now := time.Now()
	since := r.last.Since
	if result == reloadOK {
		since = now
	}
	r.last = status.Reload{File: r.path, At: now, Why: why, Result: result, Since: since}
}

// warnFields logs each field the rules name that no event is known to
// carry, once a reading: a rule naming it most likely never fires, which
// the operator mends in the rule or in event_fields.
func warnFields(log *slog.Logger, ws []config.FieldWarning) {
	for _, w := range ws {
		log.Warn("rule names a field no event is known to carry", "file", w.File, "rule", w.Rule, "key", w.Key,
			"field", w.Field, "did_you_mean", w.Suggestion)
	}
}

// refuse logs and counts a reading whose rules are not put in force.
func (r *reloader) refuse(result, msg, why string, err error) string {
	r.log.Error(msg, "file", r.path, "reason", why, "err", err)
	r.reloads.WithLabelValues(result).Inc()
	r.last = status.Reload{File: r.path, At: time.Now(), Why: why, Result: result, Err: err.Error(), Since: r.last.Since}
	return result
}

// recovery is what a reading that leaves valid rules in force adds to its
// line when the one before was refused: otherwise the refusal's ERROR would
// read as the state of things. took then clears the refusal.
func (r *reloader) recovery() string {
	if !r.last.Refused() {
		return ""
	}
	return "; previous edit was refused"
}

// arm starts watching the rules file, so that a change from now on is
// seen; watch acts on it. A file that cannot be watched is logged, and is
// reloaded on signals still.
func (r *reloader) arm() {
	r.names = map[string]bool{filepath.Base(r.path): true}
	w, err := r.watcher(r.names)
	if err != nil {
		r.log.Error("rules file not watched; reload it with SIGHUP", "file", r.path, "err", err)
		return
	}
	r.w = w
}

// close stops the watch; it is idempotent.
func (r *reloader) close() {
	r.closeOnce.Do(func() {
		if r.w != nil {
			_ = r.w.Close()
		}
	})
}

// watch reloads the rules when their file changes and when a signal
// arrives on hup, until ctx is done.
func (r *reloader) watch(ctx context.Context, hup <-chan os.Signal) {
	defer r.close()
	var events <-chan fsnotify.Event
	var errs <-chan error
	if r.w != nil {
		events, errs = r.w.Events, r.w.Errors
	}
	names := r.names
	// The file may have changed between its first reading and arm.
	r.mu.Lock()
	r.read("start", false)
	r.mu.Unlock()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-hup:
			r.reload("signal")
		case ev := <-events:
			// "..data" and its kin are a ConfigMap's symlinks.
			if base := filepath.Base(ev.Name); names[base] || strings.HasPrefix(base, "..") {
				timer.Reset(settle)
			}
		case <-timer.C:
			r.reload("file changed")
		case err := <-errs:
			r.log.Warn("watching the rules file", "file", r.path, "err", err)
		}
	}
}

// watcher watches the rules file's directory and, when the file is a
// symlink to a file elsewhere, that file's directory too, adding its name
// to names.
func (r *reloader) watcher(names map[string]bool) (*fsnotify.Watcher, error) {
	dirs := []string{filepath.Dir(r.path)}
	if target, err := filepath.EvalSymlinks(r.path); err == nil && filepath.Dir(target) != dirs[0] {
		names[filepath.Base(target)] = true
		dirs = append(dirs, filepath.Dir(target))
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("directory %s: %w", d, err)
		}
	}
	return w, nil
}
