package dispatch_test

import (
	"context"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
)

// lifeNotifier is a receiver that shows an alert's life (an Updater):
// its posts give a receipt, its updates are recorded.
type lifeNotifier struct {
	name    string
	mu      sync.Mutex
	posts   []alert.Alert
	updates []update
	refuse  error // every update's answer, when set
}

type update struct {
	a  alert.Alert
	st alert.State
	r  alert.Receipt
}

func (n *lifeNotifier) Name() string { return n.name }

func (n *lifeNotifier) Notify(_ context.Context, a alert.Alert) (alert.Receipt, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.posts = append(n.posts, a)
	return alert.Receipt{Channel: "C1", TS: a.EventID}, nil
}

func (n *lifeNotifier) Update(_ context.Context, a alert.Alert, st alert.State, r alert.Receipt) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.refuse != nil {
		return n.refuse
	}
	n.updates = append(n.updates, update{a, st, r})
	return nil
}

func (n *lifeNotifier) counts() (posts, updates int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.posts), len(n.updates)
}

// plainNotifier is a receiver that neither digests nor updates (a
// webhook's kind).
type plainNotifier struct {
	name  string
	mu    sync.Mutex
	posts []alert.Alert
}

func (n *plainNotifier) Name() string { return n.name }

func (n *plainNotifier) Notify(_ context.Context, a alert.Alert) (alert.Receipt, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.posts = append(n.posts, a)
	return alert.Receipt{}, nil
}

func (n *plainNotifier) sent() []alert.Alert {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]alert.Alert(nil), n.posts...)
}

// second is another receiver's dispatcher on e's Redis state, with e's
// rules.
func (e *testEnv) second(t *testing.T, n alert.Notifier, cfg dispatch.DispatcherConfig) *testEnv {
	t.Helper()
	cfg.KeyPrefix = e.pfx
	o := testDispatcher(t, n, cfg)
	o.knowRule()
	return o
}

// A receiver whose consumer group comes to an alert after its cooldown
// ended and a later alert of its group took it sends the alert as the
// first receiver did, and suppresses what the first suppressed
// (docs/alerts.md, Lifecycle): the decision is the alert's.
func TestALaggingReceiverFollowsTheFirstDecision(t *testing.T) {
	slack := &lifeNotifier{name: "slack"}
	first := testDispatcher(t, slack, dispatch.DispatcherConfig{})
	first.knowRule()
	pager := &plainNotifier{name: "pager"}
	second := first.second(t, pager, dispatch.DispatcherConfig{})

	a, b, c := first.alert("card-1", "evt-a"), first.alert("card-1", "evt-b"), first.alert("card-1", "evt-c")
	for i, x := range []alert.Alert{a, b} { // b: suppressed, a holds the cooldown
		if err := handleOne(t.Context(), first.d, first.message(t, x, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	first.rdb.Del(t.Context(), a.CooldownKey) // a's cooldown ends
	if err := handleOne(t.Context(), first.d, first.message(t, c, 2)); err != nil {
		t.Fatal(err)
	}
	if posts, _ := slack.counts(); posts != 2 {
		t.Fatalf("slack posted %d, want a and c", posts)
	}
	for i, x := range []alert.Alert{a, b, c} {
		if err := handleOne(t.Context(), second.d, second.message(t, x, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	got := pager.sent()
	if len(got) != 2 || got[0].ID != a.ID || got[1].ID != c.ID {
		t.Errorf("the pager posted %v, want a and c, as slack did", ids(got))
	}
	if got := second.metric(t, "fraudwatch_alerts_suppressed_total", "rule", a.Rule, "reason", dispatch.SuppressedCooldown); got != 1 {
		t.Errorf("the pager suppressed %v, want b alone", got)
	}
}

func ids(alerts []alert.Alert) []string {
	var out []string
	for _, a := range alerts {
		out = append(out, a.ID)
	}
	return out
}

// updateMessage is an update's message for a's life at offset.
func updateMessage(t *testing.T, a alert.Alert, offset int64) kafka.Message {
	t.Helper()
	v, err := dispatch.EncodeUpdate(alert.Ref{Rule: a.Rule, Group: a.Group, EventID: a.EventID})
	if err != nil {
		t.Fatal(err)
	}
	return kafka.Message{Topic: "alerts", Offset: offset, Value: v}
}

// A change of an alert's life is shown where each receiver that delivered
// it shows it (an Updater), once a change, with the receipt of its post,
// from what Redis holds; the time to acknowledge is observed once across
// receivers; updates of no alert, and malformed ones, change nothing.
func TestAnUpdateIsShownOnceWhereTheAlertIs(t *testing.T) {
	slack := &lifeNotifier{name: "slack"}
	first := testDispatcher(t, slack, dispatch.DispatcherConfig{})
	first.knowRule()
	hook := &plainNotifier{name: "hook"}
	second := first.second(t, hook, dispatch.DispatcherConfig{})
	dl := &fakeDeadLetters{}
	first.d.SetDeadLetters(dl)

	a := first.alert("card-1", "evt-a")
	for _, e := range []*testEnv{first, second} {
		if err := handleOne(t.Context(), e.d, e.message(t, a, 1)); err != nil {
			t.Fatal(err)
		}
	}
	key := first.alertKey(t, a)
	if _, _, err := first.scripts.ChangeLife(t.Context(), key, "acknowledge", "cli:ann"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the update, and a redelivery of it
		for _, e := range []*testEnv{first, second} {
			if err := handleOne(t.Context(), e.d, updateMessage(t, a, int64(10+i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, updates := slack.counts()
	if updates != 1 {
		t.Fatalf("slack shown %d updates, want 1", updates)
	}
	u := slack.updates[0]
	if u.st.Status != alert.StatusAcknowledged || u.st.AckedBy != "cli:ann" || u.r != (alert.Receipt{Channel: "C1", TS: "evt-a"}) || u.a.ID != a.ID || u.a.Description == "" {
		t.Errorf("update %+v, want a acknowledged by cli:ann, with its post's receipt and its trusted copy", u)
	}
	if rec := first.record(t, a, "slack"); rec.Shown != 1 {
		t.Errorf("slack's record shows version %d, want 1", rec.Shown)
	}
	observed := histogramCount(t, first) + histogramCount(t, second)
	if observed != 1 {
		t.Errorf("time to acknowledge observed %d times over both receivers, want once", observed)
	}
	// A resolve is the next change.
	if _, _, err := first.scripts.ChangeLife(t.Context(), key, "resolve", "cli:bob"); err != nil {
		t.Fatal(err)
	}
	if err := handleOne(t.Context(), first.d, updateMessage(t, a, 12)); err != nil {
		t.Fatal(err)
	}
	if _, updates := slack.counts(); updates != 2 || slack.updates[1].st.Status != alert.StatusResolved {
		t.Errorf("after the resolve: %d updates, want it shown", updates)
	}
	// A label comes after the resolve, and is shown as the rest is.
	if _, _, err := first.scripts.ChangeLife(t.Context(), key, "label_fraud", "slack:U7"); err != nil {
		t.Fatal(err)
	}
	if err := handleOne(t.Context(), first.d, updateMessage(t, a, 14)); err != nil {
		t.Fatal(err)
	}
	if _, updates := slack.counts(); updates != 3 || slack.updates[2].st.Label != alert.LabelFraud ||
		slack.updates[2].st.LabelledBy != "slack:U7" || slack.updates[2].st.LabelledAt.IsZero() {
		t.Errorf("after the label: %d updates (%+v), want it shown with who and when", updates, slack.updates[len(slack.updates)-1].st)
	}
	// Of no alert: counted, nothing shown, committed; malformed: dead-lettered.
	ghost := first.alert("card-9", "evt-ghost")
	if err := handleOne(t.Context(), first.d, updateMessage(t, ghost, 15)); err != nil {
		t.Fatal(err)
	}
	if got := first.metric(t, "fraudwatch_alert_updates_total", "result", dispatch.UpdateUnknown); got != 1 {
		t.Errorf("unknown updates %v, want 1", got)
	}
	for i, v := range []string{`{"type":"alert_update","rule":"r","group":"{x}","event_id":"e"}`,
		`{"type":"alert_update","rule":"r","group":"g","event_id":"e","extra":1}`, `{"type":"other"}`} {
		if err := handleOne(t.Context(), first.d, kafka.Message{Topic: "alerts", Offset: int64(20 + i), Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(dl.whys) != 3 {
		t.Errorf("dead-lettered %d malformed updates, want 3: %q", len(dl.whys), dl.whys)
	}
	if _, updates := slack.counts(); updates != 3 {
		t.Errorf("%d updates shown after the forged ones, want 3", updates)
	}
}

// histogramCount is how many observations fraudwatch_alert_ack_seconds
// holds over every rule.
func histogramCount(t *testing.T, e *testEnv) uint64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range families {
		if mf.GetName() == "fraudwatch_alert_ack_seconds" {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// A dispatcher skips, counting them, the alerts of a rule whose routes
// name other receivers; nil routes to every receiver.
func TestAnAlertGoesOnlyToItsRoutes(t *testing.T) {
	hook := &plainNotifier{name: "hook"}
	e := testDispatcher(t, hook, dispatch.DispatcherConfig{})
	a := e.alert("card-1", "evt-a")
	rs := settingsOf(a)
	rs.Receivers = []string{"slack", "pager"}
	e.d.SetRules(map[string]dispatch.RuleSettings{a.Rule: rs})
	if err := handleOne(t.Context(), e.d, e.message(t, a, 1)); err != nil {
		t.Fatal(err)
	}
	if len(hook.sent()) != 0 || e.record(t, a, "hook").State != "" {
		t.Errorf("hook posted %d and recorded %q, want nothing: the rule routes elsewhere", len(hook.sent()), e.record(t, a, "hook").State)
	}
	if got := e.metric(t, "fraudwatch_alerts_routed_elsewhere_total", "rule", a.Rule); got != 1 {
		t.Errorf("routed elsewhere %v, want 1", got)
	}
	rs.Receivers = append(rs.Receivers, "hook")
	rs.Links = []alert.LinkTemplate{{Text: "Order", URL: "https://backoffice.example/orders/{order_id}"}}
	e.d.SetRules(map[string]dispatch.RuleSettings{a.Rule: rs})
	if err := handleOne(t.Context(), e.d, e.message(t, a, 2)); err != nil {
		t.Fatal(err)
	}
	got := hook.sent()
	if len(got) != 1 || len(got[0].Links) != 1 || got[0].Links[0].URL != "https://backoffice.example/orders/"+a.OrderID {
		t.Errorf("hook posted %+v, want a with its rule's link", got)
	}
}

// A receiver that sends no digests (a webhook, PagerDuty) keeps to its
// budget too: past it, its alerts wait in Redis, whole, and the drainer
// sends them one by one, each its own message, as the budget allows;
// none is dropped.
func TestABudgetHoldsWithoutDigests(t *testing.T) {
	hook := &plainNotifier{name: "hook"}
	e := testDispatcher(t, hook, dispatch.DispatcherConfig{})
	sb := e.withBudget(t, hook, true, false, false, true, false, true)
	var msgs []kafka.Message
	var alerts []alert.Alert
	for i, g := range []string{"card-1", "card-2", "card-3"} {
		a := e.alert(g, "evt-"+g)
		a.Evidence = []alert.Evidence{{EventID: "evt-0", OrderID: "ord-0", Amount: 5}}
		alerts = append(alerts, a)
		msgs = append(msgs, e.message(t, a, int64(i)))
	}
	if n, err := e.d.HandleMessages(t.Context(), msgs); n != 3 || err != nil {
		t.Fatalf("HandleMessages = %d, %v", n, err)
	}
	if got := hook.sent(); len(got) != 1 {
		t.Fatalf("posted %d at once, want 1: the others are past the budget", len(got))
	}
	// A pass whose budget is spent sends nothing; then one a pass.
	for pass, want := range []int{1, 2, 3} {
		if err := e.d.DrainWaiting(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := len(hook.sent()); got != want {
			t.Fatalf("pass %d: %d posted, want %d", pass, got, want)
		}
	}
	for _, p := range hook.sent()[1:] {
		if p.Description == "" || len(p.Evidence) != 1 {
			t.Errorf("%s waited and was posted without its description or evidence", p.ID)
		}
	}
	if sb.calls < 6 {
		t.Errorf("the budget was asked %d times, want every message to take from it", sb.calls)
	}
}

// The log has no budget: its alerts never wait, whatever the budget says.
func TestTheLogHasNoBudget(t *testing.T) {
	n := dispatch.NewLogNotifier(nil)
	e := testDispatcher(t, n, dispatch.DispatcherConfig{})
	sb := e.withBudget(t, n, false, false)
	a, b := e.alert("card-1", "evt-a"), e.alert("card-2", "evt-b")
	if got, err := e.d.HandleMessages(t.Context(), []kafka.Message{e.message(t, a, 1), e.message(t, b, 2)}); got != 2 || err != nil {
		t.Fatal(got, err)
	}
	if sb.calls != 0 || e.record(t, a, "log").State != "sent" || e.record(t, b, "log").State != "sent" {
		t.Errorf("the log asked the budget %d times, recorded %q and %q; want none asked, both sent", sb.calls,
			e.record(t, a, "log").State, e.record(t, b, "log").State)
	}
}

// threadNotifier is a lifeNotifier that replies in threads (a Threader).
type threadNotifier struct {
	lifeNotifier
	replies []update // a: the repeat, r: its parent
}

func (n *threadNotifier) Reply(_ context.Context, repeat alert.Alert, parent alert.Receipt) (alert.Receipt, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.replies = append(n.replies, update{a: repeat, r: parent})
	return alert.Receipt{Channel: parent.Channel, TS: repeat.EventID}, nil
}

func (n *threadNotifier) Note(context.Context, alert.Receipt, string) error { return nil }

// A repeat crossing (suppressed: another alert of its group holds the
// cooldown) is posted once, through redeliveries, as a reply in the
// thread of the holder's post by a receiver that threads; it is counted
// once per receiver, threaded or not.
func TestARepeatGoesInItsAlertsThread(t *testing.T) {
	slack := &threadNotifier{lifeNotifier: lifeNotifier{name: "slack"}}
	first := testDispatcher(t, slack, dispatch.DispatcherConfig{})
	first.knowRule()
	hook := &plainNotifier{name: "hook"}
	second := first.second(t, hook, dispatch.DispatcherConfig{})
	a, b := first.alert("card-1", "evt-a"), first.alert("card-1", "evt-b")
	for _, e := range []*testEnv{first, second} {
		for i, x := range []alert.Alert{a, b, b} { // b delivered twice
			if err := handleOne(t.Context(), e.d, e.message(t, x, int64(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(slack.replies) != 1 || slack.replies[0].a.ID != b.ID || slack.replies[0].r != (alert.Receipt{Channel: "C1", TS: "evt-a"}) {
		t.Fatalf("slack's replies %+v, want b once, in a's thread", slack.replies)
	}
	if posts, _ := slack.counts(); posts != 1 || len(hook.sent()) != 1 {
		t.Errorf("posts: slack %d, hook %d; want a alone at each", posts, len(hook.sent()))
	}
	if got := first.metric(t, "fraudwatch_alert_repeats_total", "rule", a.Rule, "receiver", "slack"); got != 1 {
		t.Errorf("slack counted %v repeats, want 1", got)
	}
	if got := second.metric(t, "fraudwatch_alert_repeats_total", "rule", a.Rule, "receiver", "hook"); got != 1 {
		t.Errorf("the hook counted %v repeats, want 1 (not threaded)", got)
	}
}

// An alert acknowledged while it waited for its budget is posted as it was
// published, open, and then brought up to date at once: the update that
// said the change came before there was a post to show it on.
func TestAnAlertChangedBeforeItsPostIsShownAfterIt(t *testing.T) {
	slack := &lifeNotifier{name: "slack"}
	e := testDispatcher(t, slack, dispatch.DispatcherConfig{})
	e.withBudget(t, slack, true, false, true)
	first, late := e.alert("card-1", "evt-1"), e.alert("card-2", "evt-2")
	if n, err := e.d.HandleMessages(t.Context(), []kafka.Message{e.message(t, first, 1), e.message(t, late, 2)}); n != 2 || err != nil {
		t.Fatalf("HandleMessages = %d, %v", n, err)
	}
	if posts, _ := slack.counts(); posts != 1 {
		t.Fatalf("%d posted, want the first: the second waits for the budget", posts)
	}
	if _, _, err := e.scripts.ChangeLife(t.Context(), e.alertKey(t, late), "acknowledge", "cli:ann"); err != nil {
		t.Fatal(err)
	}
	// The update is read while the alert waits: nothing to show it on.
	if err := handleOne(t.Context(), e.d, updateMessage(t, late, 3)); err != nil {
		t.Fatal(err)
	}
	if err := e.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	posts, updates := slack.counts()
	if posts != 2 || updates != 1 || slack.updates[0].a.ID != late.ID || slack.updates[0].st.AckedBy != "cli:ann" {
		t.Fatalf("%d posts and updates %+v, want the late alert posted and then shown acknowledged by cli:ann", posts, slack.updates)
	}
	if rec := e.record(t, late, "slack"); rec.Shown != 1 {
		t.Errorf("the record shows version %d, want 1", rec.Shown)
	}
}
