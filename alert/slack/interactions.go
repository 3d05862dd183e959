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

	"github.com/redis/go-redis/v9"
	"github.com/slack-go/slack"
)

// Silencer does what a button asks: creates a Snooze's silence, records an
// Acknowledge in the alert's record for this receiver (ReceiverName).
type Silencer interface {
	Snooze(ctx context.Context, rule, group string, match map[string]string, d time.Duration, who string) (Recorded, error)
	Acknowledge(ctx context.Context, rule, group, eventID, who string) (Recorded, error)
}

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
	seen    replays
	client  *http.Client
	log     *slog.Logger
}

// NewInteractions returns the handler of /slack/interactions.
func NewInteractions(signingSecret string, s Silencer, seen replays, client *http.Client, log *slog.Logger) (*Interactions, error) {
	if signingSecret == "" || s == nil || seen == nil {
		return nil, errors.New("slack: interactions need a signing secret, a silencer and a replay guard")
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Interactions{secret: signingSecret, silence: s, seen: seen, client: client, log: log}, nil
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
	note, err := h.act(r.Context(), act, &cb)
	if err != nil {
		// err names no group value: silence's errors do not.
		h.log.Warn("slack interaction failed", "action", act.ActionID, "slack_user", escapeID(cb.User.ID), "err", err)
		note = ":warning: " + err.Error()
	}
	// Slack waits 3 seconds for this answer; the message's update goes
	// through its response_url. A click that did nothing leaves the
	// buttons, to try again or to click another.
	w.WriteHeader(http.StatusOK)
	if err := h.update(r.Context(), &cb, note, err != nil); err != nil {
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

// act does what a button asks and says so, for the message. Each click is
// logged once, for the audit: who, what, which rule, which group (by its
// fields and GroupRef, never its values), which silence until when.
func (h *Interactions) act(ctx context.Context, act *slack.BlockAction, cb *slack.InteractionCallback) (string, error) {
	who := escapeID(cb.User.ID)
	var v buttonValue
	if err := json.Unmarshal([]byte(act.Value), &v); err != nil || v.Rule == "" || v.Group == "" {
		return "", errors.New("this button carries no alert")
	}
	switch act.ActionID {
	case actionAck:
		if v.Event == "" {
			return "", errors.New("this Acknowledge button was posted by a fraudwatch that did not keep acknowledgements " +
				"with each alert, and names no alert: nothing was recorded (the Snooze buttons still work)")
		}
		rec, err := h.silence.Acknowledge(ctx, v.Rule, v.Group, v.Event, "slack:"+who)
		if err != nil {
			return "", fmt.Errorf("could not record the acknowledgement: %w", err)
		}
		h.log.Info("alert acknowledged in slack", append(audit("acknowledge", who, v.Rule, rec),
			"alert_id", v.Rule+"/"+v.Event, "acknowledged_before", rec.Before)...)
		return fmt.Sprintf(":white_check_mark: Acknowledged by %s at %s", mention(rec.AckedBy),
			rec.AckedAt.UTC().Format("2006-01-02 15:04 MST")), nil
	case actionSnooze:
		d, err := time.ParseDuration(v.Snooze)
		if err != nil || d <= 0 || d > 24*time.Hour {
			return "", errors.New("this button carries no snooze")
		}
		rec, err := h.silence.Snooze(ctx, v.Rule, v.Group, v.Match, d, "slack:"+who)
		if err != nil {
			return "", fmt.Errorf("could not snooze: %w", err)
		}
		h.log.Info("alert snoozed from slack", append(audit("snooze", who, v.Rule, rec),
			"for", d, "silence_id", rec.SilenceID, "until", rec.Ends.UTC().Format(time.RFC3339))...)
		return fmt.Sprintf(":zzz: Snoozed by <@%s> for %s, until %s", who, snoozeText(d),
			rec.Ends.UTC().Format("2006-01-02 15:04 MST")), nil
	}
	return "", errors.New("unknown button")
}

// audit is the attributes every click's log line has.
func audit(action, who, rule string, rec Recorded) []any {
	return []any{"action", action, "slack_user", who, "rule", rule,
		"group_by", strings.Join(rec.GroupBy, ","), "group_ref", rec.GroupRef}
}

// update replaces the alert's message with itself, its buttons gone (kept
// when keep) and a line saying who did what, until when.
func (h *Interactions) update(ctx context.Context, cb *slack.InteractionCallback, note string, keep bool) error {
	if !strings.HasPrefix(cb.ResponseURL, "https://") && !strings.HasPrefix(cb.ResponseURL, "http://") {
		return errors.New("no response_url")
	}
	var blocks []slack.Block
	for _, b := range cb.Message.Blocks.BlockSet {
		if keep || b.BlockType() != slack.MBTAction {
			blocks = append(blocks, b)
		}
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn(note)))
	msg := slack.WebhookMessage{Text: cb.Message.Text, ReplaceOriginal: true, Blocks: &slack.Blocks{BlockSet: blocks}}
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cb.ResponseURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("response_url answered %s", resp.Status)
	}
	return nil
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

// setNXer is what RedisReplays needs of a go-redis client.
type setNXer interface {
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
}

// RedisReplays remembers requests in Redis, under prefix, so that every
// replica refuses a request another one handled.
type RedisReplays struct {
	rdb    setNXer
	prefix string
}

// NewRedisReplays returns a replay guard on rdb under the key prefix.
func NewRedisReplays(rdb setNXer, prefix string) *RedisReplays {
	return &RedisReplays{rdb: rdb, prefix: prefix}
}

// First reports whether request is new, and remembers it for ttl.
func (r *RedisReplays) First(ctx context.Context, request string, ttl time.Duration) (bool, error) {
	sum := sha256.Sum256([]byte(request))
	return r.rdb.SetNX(ctx, r.prefix+":slack-seen:"+hex.EncodeToString(sum[:16]), 1, ttl).Result()
}
