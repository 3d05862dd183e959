package main

import (
	"testing"
	"time"
)

// A share is each process's CPU over the seconds between two takes, in
// percent of a core; the machine's is its busy time over all of it; the
// calls are per event processed meanwhile.
func TestCPUShare(t *testing.T) {
	t0 := time.Unix(100, 0)
	last := cpuTaken{at: t0, redis: 10, fw: 5, broker: 3, self: 1, busy: 100, all: 400, calls: 1000, redisWait: 2, fwWait: 4}
	for _, tc := range []struct {
		name   string
		now    cpuTaken
		events float64
		want   string
	}{
		{"two seconds", cpuTaken{at: t0.Add(2 * time.Second), redis: 11.5, fw: 5.8, broker: 3.6, self: 1.3, busy: 103.4, all: 404, calls: 1900, redisWait: 2.2, fwWait: 6},
			1800, "0.50 script calls an event; CPU redis-server 75 %, fraudwatch 40 %, the broker 30 %, the bench 15 %, the machine 85 % busy; waiting for a core: redis-server 10 % of the time, fraudwatch's threads 100 %"},
		{"nothing read, no events", cpuTaken{at: t0.Add(time.Second), redis: 10, fw: 5, broker: 3, self: 1, busy: 100, all: 400, calls: 1000, redisWait: 2, fwWait: 4},
			0, "0.00 script calls an event; CPU redis-server 0 %, fraudwatch 0 %, the broker 0 %, the bench 0 %, the machine 0 % busy; waiting for a core: redis-server 0 % of the time, fraudwatch's threads 0 %"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.now.since(last, tc.events).String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
