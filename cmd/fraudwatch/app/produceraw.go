package app

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/config"
)

// topicRole is a configured topic and the role that names it.
type topicRole struct{ role, topic string }

func topicRoles(k config.Kafka) []topicRole {
	return []topicRole{{"orders", k.OrdersTopic}, {"refunds", k.RefundsTopic},
		{"dead-letter", k.DeadLetterTopic}, {"alerts", k.AlertsTopic}, {"outcomes", k.OutcomesTopic}}
}

// RawTopic is the configured topic that name names: by its role (orders,
// refunds, dead-letter, alerts, outcomes) or by its name. Any other name is refused,
// so that a typo cannot write to a new topic (a broker may create it), and
// so is a role that is also another topic's name.
func RawTopic(k config.Kafka, name string) (string, error) {
	var byRole, nameOf string // the topic of role name; the role of topic name
	var choices []string
	for _, r := range topicRoles(k) {
		if r.role == name {
			byRole = r.topic
		}
		if r.topic == name && nameOf == "" {
			nameOf = r.role
		}
		choices = append(choices, fmt.Sprintf("%s (%s)", r.role, r.topic))
	}
	switch {
	case byRole != "" && nameOf != "" && byRole != name:
		return "", fmt.Errorf("--topic %q is ambiguous: the %s topic is %q, and %q is the %s topic; name the one you mean by its other name",
			name, name, byRole, name, nameOf)
	case byRole != "":
		return byRole, nil
	case nameOf != "":
		return name, nil
	}
	return "", fmt.Errorf("--topic %q is not a configured topic; give a role or a name: %s", name, strings.Join(choices, ", "))
}

// ProduceRaw sends every line of in to topic as it is, byte for byte but
// for its "\n": a line that is not JSON, JSON that is not an object, a
// blank line (an empty value) alike, so that whatever a consumer of the
// topic must withstand can be replayed. key, when not nil, is every
// message's key; without one the messages are spread over the partitions.
// Only a line longer than 16 MiB stops it, after the lines before it are
// sent.
func ProduceRaw(ctx context.Context, k config.Kafka, topic string, key []byte, in io.Reader) (ProduceStats, error) {
	b, err := newBatcher(k, "lines")
	if err != nil {
		return ProduceStats{}, err
	}
	defer b.w.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	sc.Split(rawLines)
	line := 0
	for sc.Scan() {
		line++
		msg := kafka.Message{Topic: topic, Key: key, Value: append([]byte{}, sc.Bytes()...)}
		if err := b.add(ctx, msg, ""); err != nil {
			return b.sent, err
		}
	}
	if err := sc.Err(); err != nil {
		return b.sent, b.badLine(ctx, line+1, scanError(err))
	}
	return b.sent, b.flush(ctx)
}

// rawLines is bufio.ScanLines but for a carriage return before the "\n",
// which it keeps: a raw line is sent as it is.
func rawLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// scanError says why a line could not be read.
func scanError(err error) string {
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Sprintf("longer than %d MiB", maxLine>>20)
	}
	return err.Error()
}
