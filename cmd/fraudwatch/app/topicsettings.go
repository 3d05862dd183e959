package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/config"
)

// unsafeSettings reads the settings of the existing topics among wanted
// and says, per topic, which of them break what docs/design.md promises:
// compaction on any topic (every one is keyed by something that repeats,
// so it keeps only a key's latest message), and on the alerts topic a
// retention shorter than the delivery records' (alerts a Slack outage
// holds back are deleted before they are posted).
func unsafeSettings(ctx context.Context, client *kafka.Client, wanted []wantedTopic, exists func(string) bool) (map[string][]string, error) {
	req := &kafka.DescribeConfigsRequest{}
	byName := map[string]wantedTopic{}
	for _, w := range wanted {
		if exists(w.name) {
			byName[w.name] = w
			req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{
				ResourceType: kafka.ResourceTypeTopic, ResourceName: w.name,
				ConfigNames: []string{"cleanup.policy", "retention.ms"}})
		}
	}
	if len(req.Resources) == 0 {
		return nil, nil
	}
	resp, err := client.DescribeConfigs(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("describe the topics' settings: %w", err)
	}
	problems := map[string][]string{}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return nil, fmt.Errorf("describe the settings of topic %s: %w", r.ResourceName, r.Error)
		}
		w := byName[r.ResourceName]
		for _, e := range r.ConfigEntries {
			if p := settingProblem(w, e.ConfigName, e.ConfigValue); p != "" {
				problems[w.name] = append(problems[w.name], p)
			}
		}
	}
	return problems, nil
}

// settingProblem says how one setting of w breaks a promise ("" if not).
func settingProblem(w wantedTopic, name, value string) string {
	switch name {
	case "cleanup.policy":
		if strings.Contains(value, "compact") {
			return fmt.Sprintf("cleanup.policy=%s keeps only each key's latest message and so drops %s; set cleanup.policy=delete", value, w.holds)
		}
	case "retention.ms":
		ms, err := strconv.ParseInt(value, 10, 64)
		if w.minRetention > 0 && err == nil && ms >= 0 && time.Duration(ms)*time.Millisecond < w.minRetention {
			return fmt.Sprintf("retention.ms=%s (%v) deletes %s a Slack outage holds back longer than that; set retention.ms=%d (%v) or more",
				value, time.Duration(ms)*time.Millisecond, w.holds, w.minRetention.Milliseconds(), w.minRetention)
		}
	}
	return ""
}

// checkTopicSettings logs an ERROR for each setting of the configured
// topics that breaks a promise, as `fraudwatch topics` refuses them, so
// that a replica started on such a topic says so. A cluster that does not
// let fraudwatch describe its topics is not checked (a DEBUG line).
func checkTopicSettings(ctx context.Context, k config.Kafka, log *slog.Logger) {
	transport, err := KafkaTransport(k)
	if err != nil {
		return // the consumers report it
	}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: 10 * time.Second, Transport: transport}
	problems, err := unsafeSettings(ctx, client, wantedTopics(k, 1), func(string) bool { return true })
	if err != nil {
		if errors.Is(err, kafka.UnknownTopicOrPartition) || ctx.Err() != nil {
			return // missing topics are waited for and logged by the consumers
		}
		log.Debug("the topics' settings were not checked", "err", err)
		return
	}
	n := 0
	for topic, ps := range problems {
		for _, p := range ps {
			n++
			log.Error("a topic's setting breaks fraudwatch's guarantees: fix it (fraudwatch topics names each)", "topic", topic, "problem", p)
		}
	}
	log.Debug("the topics' settings were checked", "problems", n)
}
