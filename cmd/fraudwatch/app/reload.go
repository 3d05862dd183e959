package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// receiverRules is one receiver's dispatcher and the receiver it
// delivers to.
type receiverRules struct {
	Receiver config.Receiver
	Rules    alertRules
}

// dispatchers are the dispatchers of the receivers, one a receiver: each
// takes every rule, with the rule's routes and links and its receiver's
// links (a dispatcher skips the alerts of rules not routed to it).
type dispatchers []receiverRules

// setRules hands each dispatcher the settings of set's rules.
func (ds dispatchers) setRules(set config.RuleSet) {
	for _, d := range ds {
		d.Rules.SetRules(ruleSettings(set, d.Receiver))
	}
}

// ruleSettings are set's rules as the dispatcher of rc takes them: with
// their routes' receivers (nil: every receiver) and links, the rule's own
// then those of rc's that the rule's alerts fill.
func ruleSettings(set config.RuleSet, rc config.Receiver) map[string]dispatch.RuleSettings {
	m := make(map[string]dispatch.RuleSettings, len(set.Rules))
	for _, r := range set.Rules {
		rr := set.Routing[r.Name]
		links := append(slices.Clone(rr.Links), rc.LinksFor(r.GroupBy)...)
		if len(links) == 0 {
			links = nil
		}
		m[r.Name] = dispatch.RuleSettings{
			Mode: r.Mode, Cooldown: r.Cooldown, Channel: r.Channel,
			Description: r.Description, Severity: r.Severity, Threshold: r.Threshold,
			Fingerprint: r.Fingerprint(), Metric: r.Metric, Field: r.Field, GroupBy: r.GroupBy,
			Window: r.Window, WindowType: r.WindowType,
			Receivers: slices.Clone(rr.Receivers), Links: links,
		}
	}
	return m
}

// alertSettings are rules without routes or links as a dispatcher takes
// them: every rule to every receiver.
func alertSettings(rs []rules.Rule) map[string]dispatch.RuleSettings {
	return ruleSettings(config.RuleSet{Rules: rs}, config.Receiver{})
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
	alerts dispatchers
	// receivers are the configuration's, which routes name; nil when not
	// known (newReloader), and then not checked.
	receivers []config.Receiver
	log       *slog.Logger

	reloads *prometheus.CounterVec
	version *prometheus.GaugeVec

	mu      sync.Mutex
	set     config.RuleSet // the rules in force, with their routes
	current string         // set's version
	// last is what the last reading came to: its one home, which the
	// status page reads (lastReading).
	last status.Reload

	w         *fsnotify.Watcher // nil until arm, or when it failed
	names     map[string]bool   // the file names whose events matter
	closeOnce sync.Once
}

// newReloader is newRoutedReloader for one dispatcher, whose receiver
// is not known: routes are checked as far as the rules file alone shows.
// The app uses it until it wires a dispatcher a receiver (issue 38).
func newReloader(path string, rs []rules.Rule, engine ruleSetter, alerts alertRules, log *slog.Logger, reg prometheus.Registerer) (*reloader, error) {
	return newRoutedReloader(path, config.RuleSet{Rules: rs}, nil, engine, dispatchers{{Rules: alerts}}, log, reg)
}

// newRoutedReloader keeps set, the rules and routes read at start, in
// step with the rules file, handing each new set to the engine and to
// every receiver's dispatcher; receivers are the configuration's, which
// the routes of a new set must name.
func newRoutedReloader(path string, set config.RuleSet, receivers []config.Receiver, engine ruleSetter, alerts dispatchers,
	log *slog.Logger, reg prometheus.Registerer) (*reloader, error) {
	now := time.Now()
	// The rules were read from the file just before, at start.
	r := &reloader{path: path, engine: engine, alerts: alerts, receivers: receivers, log: log, set: set, current: set.Version(),
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
	return r.set.Rules
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
	if r.receivers != nil {
		// Its routes must name the configuration's receivers, and reach
		// each.
		if err := set.CheckReceivers(r.receivers); err != nil {
			return r.refuse(reloadInvalid, "rules file invalid; the rules in force run on", why, err)
		}
	}
	rs := set.Rules
	v := set.Version()
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
	changes := rules.Diff(r.set.Rules, rs)
	// The dispatchers first: the engine's first alert of a new rule then
	// finds its rule there.
	r.alerts.setRules(set)
	r.engine.SetRules(rs)
	r.version.DeleteLabelValues(r.current)
	r.version.WithLabelValues(v).Set(1)
	attrs := []any{"file", r.path, "reason", why, "version", v, "previous_version", r.current,
		"rules", len(rs), "changes", reloadChanges(changes)}
	if !reflect.DeepEqual(r.set.Routing, set.Routing) {
		// Where alerts go changed: its detail is check's to show.
		attrs = append(attrs, "routes_changed", true)
	}
	r.log.Info("rules reloaded"+r.recovery(), attrs...)
	warnFields(r.log, config.FieldWarnings(r.path, rs, set.EventFields))
	r.set, r.current = set, v
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
