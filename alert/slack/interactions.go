package slack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/internal/redisonce"
)

// Silencer does what a button asks: creates a Snooze's silence, records an
// Acknowledge in the alert's record for this receiver (ReceiverName) when
// the Interactions have no Life (WithLife). A Silencer that is also a
// MessageSnoozer is given the snoozed alert's message.
type Silencer interface {
	Snooze(ctx context.Context, rule, group string, match map[string]string, d time.Duration, who string) (Recorded, error)
	Acknowledge(ctx context.Context, rule, group, eventID, who string) (Recorded, error)
}

// MessageSnoozer snoozes as Silencer does, and keeps with the silence the
// receipt of the message whose Snooze was clicked (its channel and ts), so
// that the silence's end is said in that message's thread
// (silence.Sweeper).
type MessageSnoozer interface {
	SnoozeMessage(ctx context.Context, rule, group string, match map[string]string, d time.Duration, who string,
		msg alert.Receipt) (Recorded, error)
}

// Life changes an alert's life (acknowledge, resolve, assign to who) where
// every replica and receiver reads it, tells the receivers, and returns
// the alert's state after the change. A change already made (a second
// Acknowledge) changes nothing and returns the state as it is.
type Life interface {
	Change(ctx context.Context, ref alert.Ref, op alert.Op, who string) (alert.State, error)
}

// Option sets up Interactions beyond NewInteractions' arguments.
type Option func(*Interactions)

// WithLife makes Acknowledge, Resolve and Assign to me change the alert's
// life through l, and answer with the message showing its new state and
// the buttons it still allows. Without it, Acknowledge is recorded by the
// Silencer, and Resolve and Assign to me record nothing and say so.
func WithLife(l Life) Option { return func(h *Interactions) { h.life = l } }

// Recorded is what a click left, as its log line names it: the silence a
// Snooze made, the acknowledgement an Acknowledge found or made, and the
// group without its values (personal data).
type Recorded struct {
	SilenceID string
	Ends      time.Time
	// AckedBy acknowledged the alert at AckedAt; Before is true when that
	// was an earlier click, which stays.
	AckedBy string
	AckedAt time.Time
	Before  bool
	// GroupBy are the rule's group_by fields, GroupRef the group as
	// silence list and its history name it (silence.Store.GroupRef).
	GroupBy  []string
	GroupRef string
}

// replays remembers the handled requests (signedRequest), so that a
// request sent again is refused: true when the request is new.
type replays interface {
	First(ctx context.Context, request string, ttl time.Duration) (bool, error)
}

// Interactions answers Slack's interactivity requests: the clicks on an
// alert's buttons. Every request must carry a valid signature made with
// the app's signing secret, less than 5 minutes old, and never seen
// before; anything else gets 401 and changes nothing.
type Interactions struct {
	secret  string
	silence Silencer
	life    Life
	seen    replays
	client  *http.Client
	log     *slog.Logger
}

// NewInteractions returns the handler of /slack/interactions.
func NewInteractions(signingSecret string, s Silencer, seen replays, client *http.Client, log *slog.Logger,
	opts ...Option) (*Interactions, error) {
	if signingSecret == "" || s == nil || seen == nil {
		return nil, errors.New("slack: interactions need a signing secret, a silencer and a replay guard")
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Interactions{secret: signingSecret, silence: s, seen: seen, client: client, log: log}
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// maxInteraction bounds a request's body; Slack's are a few KB.
const maxInteraction = 1 << 20

func (h *Interactions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxInteraction+1))
	if err != nil || len(body) > maxInteraction {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	sv, err := slack.NewSecretsVerifier(r.Header, h.secret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		h.log.Warn("slack interaction refused: bad or missing signature", "err", err)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	// A valid request is valid for 5 minutes: remember it as long, and
	// refuse it a second time.
	first, err := h.seen.First(r.Context(), signedRequest(r.Header, body), 10*time.Minute)
	if err != nil {
		h.log.Error("slack interaction: replay guard unavailable", "err", err)
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	if !first {
		h.log.Warn("slack interaction refused: replayed")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(formValue(body, "payload")), &cb); err != nil {
		http.Error(w, "no payload", http.StatusBadRequest)
		return
	}
	if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		w.WriteHeader(http.StatusOK) // not ours to act on
		return
	}
	act := cb.ActionCallback.BlockActions[0]
	ans, err := h.act(r.Context(), act, &cb)
	if err != nil {
		// err names no group value: silence's errors do not.
		h.log.Warn("slack interaction failed", "action", act.ActionID, "slack_user", escapeID(cb.User.ID), "err", err)
		ans = answer{note: ":warning: " + err.Error(), failed: true}
	}
	// Slack waits 3 seconds for this answer; the message's update goes
	// through its response_url. A click that did nothing leaves the
	// buttons, to try again or to click another.
	w.WriteHeader(http.StatusOK)
	if err := h.update(r.Context(), &cb, ans); err != nil {
		h.log.Warn("slack interaction: update the message", "err", err)
	}
}

// signedRequest names a request by what its signature signs: slack-go's
// verifier checks an HMAC of "v0:<timestamp>:<body>", taking the timestamp
// as sent. Not by the signature header as sent: its hex may be spelled in
// upper or mixed case, and verify again, as the same request.
func signedRequest(h http.Header, body []byte) string {
	sum := sha256.New()
	fmt.Fprintf(sum, "v0:%s:", h.Get("X-Slack-Request-Timestamp"))
	sum.Write(body)
	return hex.EncodeToString(sum.Sum(nil))
}

// mention is who acknowledged, as the message shows them: a Slack user by
// their mention.
func mention(who string) string {
	if id, ok := strings.CutPrefix(who, "slack:"); ok {
		return "<@" + escapeID(id) + ">"
	}
	return clipMrkdwn(who, 100)
}

// escapeID keeps a user id from breaking out of its mention.
func escapeID(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' {
			return r
		}
		return -1
	}, id)
}

// formValue reads one field of a form-encoded body.
func formValue(body []byte, name string) string {
	req, err := http.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	if err != nil {
		return ""
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req.PostFormValue(name)
}

// RedisReplays remembers requests in Redis, under prefix, so that every
// replica refuses a request another one handled.
type RedisReplays struct {
	rdb    redisonce.Processor
	prefix string
}

// NewRedisReplays returns a replay guard on rdb under the key prefix.
func NewRedisReplays(rdb redisonce.Processor, prefix string) *RedisReplays {
	return &RedisReplays{rdb: rdb, prefix: prefix}
}

// First reports whether request is new, and remembers it for ttl. It is
// sent once: resent after a lost reply, it would find its own first run's
// key and refuse a new request as replayed; a lost reply is an error, and
// Slack's user is asked to try again.
func (r *RedisReplays) First(ctx context.Context, request string, ttl time.Duration) (bool, error) {
	sum := sha256.Sum256([]byte(request))
	return redisonce.SetNX(ctx, r.rdb, r.prefix+":slack-seen:"+hex.EncodeToString(sum[:16]), 1, ttl)
}
