package main

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/fraudwatch/fraudwatch/config"
)

// -buckets reaches the replicas' redis.buckets; unset, they take the
// default.
func TestBucketsReachTheReplicas(t *testing.T) {
	for _, buckets := range []int{0, 1, 4} {
		t.Run(strconv.Itoa(buckets), func(t *testing.T) {
			r := &fraudwatchRun{dir: t.TempDir(), brokers: []string{"127.0.0.1:9092"}, redis: []string{"127.0.0.1:6379"},
				orders: "bench.orders.a", refunds: "bench.refunds.a", group: "bench-fw-a", replicas: 1, buckets: buckets}
			path, err := r.config(0, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			c, err := config.Load(path)
			if err != nil {
				t.Fatalf("load %s: %v", filepath.Base(path), err)
			}
			if c.Redis.Buckets != buckets {
				t.Errorf("redis.buckets = %d, want %d", c.Redis.Buckets, buckets)
			}
		})
	}
}
