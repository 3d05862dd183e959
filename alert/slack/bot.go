package slack

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Bot is the notifier in bot-token mode, which can also show an alert's
// life on the message it posted (chat.update: alert.Updater) and reply in
// its thread (chat.postMessage with thread_ts: alert.Threader). An
// incoming webhook can do neither, so a webhook's Notifier has no Bot, and
// is neither: a dispatcher tells them apart by the interfaces.
type Bot struct{ *Notifier }

// Bot returns n as a Bot; false in webhook mode.
func (n *Notifier) Bot() (*Bot, bool) {
	if n.api == nil {
		return nil, false
	}
	return &Bot{n}, true
}

// NewReceiver returns the notifier for cfg as the dispatcher should see
// it: a *Bot in token mode (an alert.Updater and alert.Threader), the
// plain *Notifier for an incoming webhook.
func NewReceiver(cfg Config) (alert.Notifier, error) {
	n, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if b, ok := n.Bot(); ok {
		return b, nil
	}
	return n, nil
}

// updateErrors are chat.update's answers that no retry can change: the
// message is gone, was not the app's, or can no longer be edited.
var updateErrors = map[string]bool{"message_not_found": true, "cant_update_message": true, "edit_window_closed": true}

// Update shows st on the message r names: the alert as posted (Format),
// a line for each fact of its life (who acknowledged it, resolved it, has
// it) and the buttons that still make sense (actionsFor), in place, with
// chat.update. A digest's message (r.Digest) carries other alerts too: the
// change is said in its thread instead, naming the alert. Errors are
// Notify's, and a message Slack will not edit (message_not_found,
// cant_update_message, edit_window_closed) is given up.
func (b *Bot) Update(ctx context.Context, a alert.Alert, st alert.State, r alert.Receipt) error {
	if r.Channel == "" || r.TS == "" {
		return alert.Permanent(fmt.Errorf("slack: update %s alert: its receipt names no message", a.Rule))
	}
	if r.Digest {
		_, err := b.thread(ctx, a.Rule, r, digestUpdate(a, st))
		return err
	}
	fallback, blocks := Format(a)
	var actions slack.Block
	if b.cfg.Buttons && a.Group != "" { // as Notify: a group it cannot name has none
		actions = actionsFor(st, alert.Ref{Rule: a.Rule, Group: a.Group, EventID: a.EventID},
			snoozeButtons(a.Rule, a.Group, identity(a), groupMatch(a)))
	}
	blocks = withState(blocks, st, actions)
	if text := stateText(st); text != "" {
		fallback += "\n" + text
	}
	_, _, _, err := b.api.UpdateMessageContext(ctx, r.Channel, r.TS,
		slack.MsgOptionText(fallback, false), slack.MsgOptionBlocks(blocks...))
	if err != nil {
		return b.failed(fmt.Errorf("slack: update %s alert at %schat.update: %w", a.Rule, b.base, b.redact(err)), err, r.Channel, updateErrors)
	}
	return nil
}

// digestUpdate is what a digest's thread says of one of its alerts' life.
func digestUpdate(a alert.Alert, st alert.State) string {
	text := stateText(st)
	if text == "" {
		text = "Open again"
	}
	return fmt.Sprintf("*%s* %s · order %s · %s\n%s", clipMrkdwn(a.Rule, 200), groupOf(a),
		clipMrkdwn(orNone(a.OrderID), maxIDText), a.At.UTC().Format(time.RFC3339), text)
}

// Reply posts repeat, a later crossing of the group whose alert parent
// names, as a short reply in that message's thread: the value against the
// threshold, the order, when. It returns the reply's receipt.
func (b *Bot) Reply(ctx context.Context, repeat alert.Alert, parent alert.Receipt) (alert.Receipt, error) {
	return b.thread(ctx, repeat.Rule, parent, replyText(repeat))
}

// replyText is a repeat crossing as its thread shows it.
func replyText(a alert.Alert) string {
	metric := string(a.Metric)
	if a.Metric == alert.Distinct && a.Field != "" {
		metric = "distinct " + a.Field
	}
	return fmt.Sprintf(":repeat: Crossed again: %s %s (threshold %s) · order %s · event %s · %s",
		clipMrkdwn(metric, 60), clipMrkdwn(alert.FormatValue(a.Metric, a.Current, a.Currency), 200),
		clipMrkdwn(alert.FormatValue(a.Metric, a.Threshold, a.Currency), 200),
		clipMrkdwn(orNone(a.OrderID), maxIDText), clipMrkdwn(orNone(a.EventID), maxIDText), a.At.UTC().Format(time.RFC3339))
}

// Note says text, as plain text (escaped: it can mention or link
// nothing), in the thread of parent.
func (b *Bot) Note(ctx context.Context, parent alert.Receipt, text string) error {
	_, err := b.thread(ctx, "", parent, clipMrkdwn(text, maxSectionText))
	return err
}

// thread posts text (mrkdwn, escaped by the caller) as a reply in the
// thread of parent, for rule's alert ("" for none).
func (b *Bot) thread(ctx context.Context, rule string, parent alert.Receipt, text string) (alert.Receipt, error) {
	what := strings.TrimSpace("reply in the thread of a " + rule + " alert")
	if parent.Channel == "" || parent.TS == "" {
		return alert.Receipt{}, alert.Permanent(fmt.Errorf("slack: %s: its receipt names no message", what))
	}
	// parent.TS is always a message's own: a reply's ts would start no
	// thread of its own (Slack: use the parent's).
	ch, ts, err := b.api.PostMessageContext(ctx, parent.Channel, slack.MsgOptionTS(parent.TS),
		slack.MsgOptionText(text, false), slack.MsgOptionBlocks(slack.NewSectionBlock(mrkdwn(text), nil, nil)))
	if err != nil {
		return alert.Receipt{}, b.failed(fmt.Errorf("slack: %s to %s: %w", what, b.target, b.redact(err)), err, parent.Channel, nil)
	}
	return alert.Receipt{Channel: ch, TS: ts}, nil
}
