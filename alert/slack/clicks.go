package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
)

// answer is how the clicked message changes: a line it gains (note), or
// the alert's new life (state, of ref), which replaces its state line and
// buttons. A failed click keeps every button, to try again; a Snooze drops
// the snoozes (the group is silenced); an Acknowledge recorded without a
// Life drops every button, as before alerts had a life.
type answer struct {
	note   string
	state  *alert.State
	ref    alert.Ref
	failed bool
	// snoozed: the note is a Snooze's, which leaves every button but the
	// snoozes.
	snoozed bool
}

// act does what a button asks and says how the message changes. Each
// click is logged once, for the audit: who, what, which rule, which group
// (by its fields and GroupRef, or the alert's id, never its values).
func (h *Interactions) act(ctx context.Context, act *slack.BlockAction, cb *slack.InteractionCallback) (answer, error) {
	who := escapeID(cb.User.ID)
	var v buttonValue
	if err := json.Unmarshal([]byte(act.Value), &v); err != nil || v.Rule == "" || v.Group == "" {
		return answer{}, errors.New("this button carries no alert")
	}
	switch act.ActionID {
	case actionSnooze:
		return h.snooze(ctx, v, who, clicked(cb))
	case actionAck, actionResolve, actionAssign, actionFraud, actionLegit:
		if v.Event == "" {
			return answer{}, errors.New("this Acknowledge button was posted by a fraudwatch that did not keep acknowledgements " +
				"with each alert, and names no alert: nothing was recorded (the Snooze buttons still work)")
		}
		if h.life == nil && act.ActionID == actionAck {
			return h.acknowledge(ctx, v, who)
		}
		return h.change(ctx, v, act.ActionID, who)
	}
	return answer{}, errors.New("unknown button")
}

// ops are the life changes the buttons ask for, and how their log lines
// say them.
var ops = map[string]struct {
	op   alert.Op
	verb string // what a failure could not do
	done string
}{
	actionAck:     {alert.OpAcknowledge, "acknowledge the alert", "alert acknowledged in slack"},
	actionResolve: {alert.OpResolve, "resolve the alert", "alert resolved in slack"},
	actionAssign:  {alert.OpAssign, "assign the alert", "alert assigned in slack"},
	actionFraud:   {alert.OpLabelFraud, "label the alert fraud", "alert labelled in slack"},
	actionLegit:   {alert.OpLabelLegit, "label the alert not fraud", "alert labelled in slack"},
}

// change asks the Life for the button's change of the alert's life.
func (h *Interactions) change(ctx context.Context, v buttonValue, action, who string) (answer, error) {
	op := ops[action]
	if h.life == nil {
		return answer{}, fmt.Errorf("this fraudwatch keeps no alert's life: nothing was recorded (%s)", op.op)
	}
	ref := alert.Ref{Rule: v.Rule, Group: v.Group, EventID: v.Event}
	st, err := h.life.Change(ctx, ref, op.op, "slack:"+who)
	if err != nil {
		return answer{}, fmt.Errorf("could not %s: %w", op.verb, err)
	}
	attrs := []any{"action", string(op.op), "slack_user", who, "rule", v.Rule,
		"alert_id", v.Rule + "/" + v.Event, "status", string(st.Status)}
	if _, ok := op.op.Label(); ok {
		// The label the alert has after the click: another click may
		// have come in between.
		attrs = append(attrs, "label", string(st.Label))
	}
	h.log.Info(op.done, attrs...)
	return answer{state: &st, ref: ref}, nil
}

// acknowledge records an Acknowledge through the Silencer (no Life).
func (h *Interactions) acknowledge(ctx context.Context, v buttonValue, who string) (answer, error) {
	rec, err := h.silence.Acknowledge(ctx, v.Rule, v.Group, v.Event, "slack:"+who)
	if err != nil {
		return answer{}, fmt.Errorf("could not record the acknowledgement: %w", err)
	}
	h.log.Info("alert acknowledged in slack", append(audit("acknowledge", who, v.Rule, rec),
		"alert_id", v.Rule+"/"+v.Event, "acknowledged_before", rec.Before)...)
	return answer{note: ":white_check_mark: Acknowledged" + byAt(rec.AckedBy, rec.AckedAt)}, nil
}

// snooze silences the button's group, keeping with the silence where the
// clicked message is (MessageSnoozer).
func (h *Interactions) snooze(ctx context.Context, v buttonValue, who string, msg alert.Receipt) (answer, error) {
	d, err := time.ParseDuration(v.Snooze)
	if err != nil || d <= 0 || d > 24*time.Hour {
		return answer{}, errors.New("this button carries no snooze")
	}
	var rec Recorded
	if ms, ok := h.silence.(MessageSnoozer); ok && msg.Channel != "" && msg.TS != "" {
		rec, err = ms.SnoozeMessage(ctx, v.Rule, v.Group, v.Match, d, "slack:"+who, msg)
	} else {
		rec, err = h.silence.Snooze(ctx, v.Rule, v.Group, v.Match, d, "slack:"+who)
	}
	if err != nil {
		return answer{}, fmt.Errorf("could not snooze: %w", err)
	}
	h.log.Info("alert snoozed from slack", append(audit("snooze", who, v.Rule, rec),
		"for", d, "silence_id", rec.SilenceID, "until", rec.Ends.UTC().Format(time.RFC3339))...)
	return answer{note: fmt.Sprintf(":zzz: Snoozed by <@%s> for %s, until %s", who, snoozeText(d), stamp(rec.Ends)),
		snoozed: true}, nil
}

// clicked is the receipt of the message whose button was clicked.
func clicked(cb *slack.InteractionCallback) alert.Receipt {
	r := alert.Receipt{Channel: cb.Container.ChannelID, TS: cb.Container.MessageTs}
	if r.Channel == "" {
		r.Channel = cb.Channel.ID
	}
	if r.TS == "" {
		r.TS = cb.Message.Timestamp
	}
	return r
}

// audit is the attributes every click's log line has.
func audit(action, who, rule string, rec Recorded) []any {
	return []any{"action", action, "slack_user", who, "rule", rule,
		"group_by", strings.Join(rec.GroupBy, ","), "group_ref", rec.GroupRef}
}

// answered is the clicked message's blocks as ans changes them.
func answered(blocks []slack.Block, ans answer) []slack.Block {
	if ans.state != nil {
		return withState(blocks, *ans.state, actionsFor(*ans.state, ans.ref, buttonsOf(blocks, actionSnooze)))
	}
	out := make([]slack.Block, 0, len(blocks)+1)
	var actions []slack.Block
	for _, b := range blocks {
		ab, ok := b.(*slack.ActionBlock)
		switch {
		case !ok:
			out = append(out, b)
		case ans.failed:
			actions = append(actions, b)
		case ans.snoozed:
			if rest := without(ab, actionSnooze); rest != nil {
				actions = append(actions, rest)
			}
		}
	}
	out = append(out, slack.NewContextBlock("", mrkdwn(ans.note)))
	return append(out, actions...)
}

// buttonsOf are the buttons of blocks with the action id.
func buttonsOf(blocks []slack.Block, action string) []slack.BlockElement {
	var out []slack.BlockElement
	for _, b := range blocks {
		if ab, ok := b.(*slack.ActionBlock); ok && ab.Elements != nil {
			for _, e := range ab.Elements.ElementSet {
				if btn, ok := e.(*slack.ButtonBlockElement); ok && btn.ActionID == action {
					out = append(out, btn)
				}
			}
		}
	}
	return out
}

// without is ab without its buttons of the action id; nil when none is
// left.
func without(ab *slack.ActionBlock, action string) slack.Block {
	var rest []slack.BlockElement
	if ab.Elements != nil {
		for _, e := range ab.Elements.ElementSet {
			if btn, ok := e.(*slack.ButtonBlockElement); !ok || btn.ActionID != action {
				rest = append(rest, e)
			}
		}
	}
	if len(rest) == 0 {
		return nil
	}
	return slack.NewActionBlock(ab.BlockID, rest...)
}

// update replaces the clicked message, through the click's response_url,
// with itself as ans changes it.
func (h *Interactions) update(ctx context.Context, cb *slack.InteractionCallback, ans answer) error {
	if !strings.HasPrefix(cb.ResponseURL, "https://") && !strings.HasPrefix(cb.ResponseURL, "http://") {
		return errors.New("no response_url")
	}
	blocks := answered(cb.Message.Blocks.BlockSet, ans)
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
