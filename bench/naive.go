package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/lua/seedbench"
)

// seedRefund subtracts a refund from an amount counter, keeping the
// window's end and stopping at zero: the seed-style partner of seedbench.Script.
const seedRefund = `
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
if v <= 0 then return 0 end
local left = redis.call('DECRBY', KEYS[1], ARGV[1])
if left < 0 then
  redis.call('SET', KEYS[1], '0', 'KEEPTTL')
  return 0
end
return left
`

// naiveConsumer is how a first Go consumer of this problem reads: kafka-go's
// group reader, one awaited script per rule and event, one commit per
// message. It processes the first n events of the topics and reports its
// rate.
func naiveConsumer(ctx context.Context, brokers []string, rdb *redis.Client, group, prefix string, topics []string, n int) (float64, error) {
	count, refund := redis.NewScript(seedbench.Script()), redis.NewScript(seedRefund)
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        brokers,
		GroupID:        group,
		GroupTopics:    topics,
		StartOffset:    kafka.FirstOffset,
		MinBytes:       1,
		MaxBytes:       4 << 20,
		MaxWait:        100 * time.Millisecond,
		CommitInterval: 0, // synchronous commits: one per message
	})
	defer r.Close()
	var start time.Time
	for i := range n {
		msg, err := r.FetchMessage(ctx)
		if err != nil {
			return 0, fmt.Errorf("naive consumer: fetch: %w", err)
		}
		if i == 0 {
			start = time.Now()
		}
		var ev benchEvent
		if err := json.Unmarshal(msg.Value, &ev); err != nil {
			return 0, fmt.Errorf("naive consumer: decode: %w", err)
		}
		if ev.Type == "refund" {
			err = refund.Run(ctx, rdb, []string{prefix + ":amount:{" + ev.CustomerID + "}"}, ev.Amount).Err()
		} else {
			for _, rule := range []struct {
				key       string
				inc       int64
				threshold int64
			}{
				{"count:{" + ev.CustomerID + "}", 1, 20},
				{"amount:{" + ev.CustomerID + "}", ev.Amount, 2_000_000},
				{"card:{" + ev.CardFingerprint + "}", 1, 35},
				{"ip:{" + ev.IP + "}", 1, 12},
			} {
				if err = count.Run(ctx, rdb, []string{prefix + ":" + rule.key}, rule.inc, 600, rule.threshold).Err(); err != nil {
					break
				}
			}
		}
		if err != nil {
			return 0, fmt.Errorf("naive consumer: script: %w", err)
		}
		if err := r.CommitMessages(ctx, msg); err != nil {
			return 0, fmt.Errorf("naive consumer: commit: %w", err)
		}
	}
	return float64(n-1) / time.Since(start).Seconds(), nil
}
