package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// TestKilledAtRandomCountsOnceAndAlertsOnce is the fault-injection test:
// two replicas consume 12,000 orders and refunds for 300 customers while
// one of them is killed with SIGKILL at a random moment, six times over,
// and restarted; once, one also leaves gracefully and joins again. Afterwards every counter must equal the truth computed
// from the input, and Slack must have received each expected alert once.
func TestKilledAtRandomCountsOnceAndAlertsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("long fault-injection test")
	}
	// Beside the receivers' end-to-end test (TestRoutedAlertsReachEachReceiverOnce),
	// whose minute of waiting it fills: they share nothing but the servers.
	t.Parallel()
	k := kafkatest.New(t)
	if !k.Real {
		// kfake restarts its rebalance timer whenever a member joins or
		// leaves (groups.go, rebalance()); a real coordinator does not.
		// Crashed members that rejoin with new ids then keep its groups
		// rebalancing for minutes. The suite runs this against a real
		// broker (scripts/test.sh); only a quick developer run skips it.
		if os.Getenv("CI") != "" {
			t.Fatal("the crash test needs a real Kafka broker (" + kafkatest.EnvBrokers + ")")
		}
		t.Skip("needs a real Kafka broker: set " + kafkatest.EnvBrokers + " or run scripts/test.sh")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	world := newCrashWorld(seed, 300, 10_000, 2_000)
	rng := rand.New(rand.NewPCG(seed, 1))

	orders, refunds := k.Topic(t, "orders", 4), k.Topic(t, "refunds", 4)
	dlq, alertsTopic := k.Topic(t, "dlq", 1), k.Topic(t, "alerts", 2)
	outcomesTopic := k.Topic(t, "outcomes", 1)
	slack := newSlackLog()
	srv := httptest.NewServer(slack)
	defer srv.Close()
	prefix := redistest.Prefix(t)
	// On a Redis Cluster (make test-cluster) the test has one of its own,
	// whose slots it moves between masters while the orders are counted.
	redisAddrs := redistest.Addrs(t)
	var cluster *redistest.ClusterServers
	if redistest.Cluster() {
		cluster = redistest.StartCluster(t)
		redisAddrs = cluster.Addrs
	}
	group := kafkatest.Group(t, "fw")

	configs, metrics := make([]string, 2), make([]string, 2)
	for i := range configs {
		metrics[i] = freeAddr(t)
		configs[i] = replicaConfig(t, testkit.Process{Brokers: k.Brokers[:1], Group: group, Orders: orders, Refunds: refunds,
			DeadLetter: dlq, Alerts: alertsTopic, Outcomes: outcomesTopic, RedisAddrs: redisAddrs, Cluster: redistest.Cluster(), Prefix: prefix,
			Webhook: srv.URL + "/hook", Metrics: metrics[i], Slack: []string{"digest_size: 100"}}, crashRules)
	}
	var everyReplica []*replica // the killed ones too, for their logs
	start := func(i int) *replica {
		cmd := command("run", "--config", configs[i], "--log-format", "text", "--log-level", "debug")
		r := &replica{cmd: cmd, logs: &testkit.Buffer{}, done: make(chan error, 1)}
		everyReplica = append(everyReplica, r)
		cmd.Stdout, cmd.Stderr = r.logs, r.logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { r.done <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return r
	}
	// A silence in force: one customer who crosses orders-per-customer is
	// not posted, however the replicas crash.
	var silenced string
	for _, key := range slices.Sorted(maps.Keys(world.alerts)) {
		if c, ok := strings.CutPrefix(key, "orders-per-customer "); ok {
			silenced = c
			break
		}
	}
	if silenced == "" {
		t.Fatal("no customer crosses orders-per-customer")
	}
	if out, err := command("silence", "add", "--config", configs[0], "--rule", "orders-per-customer",
		"--match", "customer_id="+silenced, "--for", "1h", "--reason", "crash test").CombinedOutput(); err != nil {
		t.Fatalf("silence add: %v\n%s", err, out)
	}
	delete(world.alerts, "orders-per-customer "+silenced)

	replicas := []*replica{start(0), start(1)}
	var kills []time.Time

	// The rules are reloaded under load too: both replicas' rules files
	// change every few hundred milliseconds, between the rules above and a
	// variant that keeps every window (another severity) and adds a shadow
	// rule, which alerts nobody.
	variant := strings.Replace(crashRules, "    severity: high\n", "    severity: critical\n", 1) +
		"  - {name: shadow-cards, metric: count, group_by: [card_fingerprint], window: 1h, threshold: 1, mode: shadow}\n"
	stopRewrites, rewritesDone := make(chan struct{}), make(chan int, 1)
	// A test that fails before its end stops the rewrites too, so that
	// none reports after the test has completed.
	var stopOnce sync.Once
	stopRewriting := func() { stopOnce.Do(func() { close(stopRewrites) }) }
	t.Cleanup(func() { stopRewriting(); <-rewritesDone })
	go func() {
		n := 0
		for {
			select {
			case <-stopRewrites:
				rewritesDone <- n
				return
			case <-time.After(time.Duration(300+rand.IntN(400)) * time.Millisecond):
			}
			n++
			body := crashRules
			if n%2 == 1 {
				body = variant
			}
			for _, c := range configs {
				path := filepath.Join(filepath.Dir(c), "rules.yaml")
				if err := os.WriteFile(path+".tmp", []byte(body), 0o600); err != nil {
					t.Error(err)
				}
				if err := os.Rename(path+".tmp", path); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	// unrecordedAtKill: the (rule, group)s posted before a kill with an
	// alert whose delivery record did not yet say sent once the killed
	// replica was gone. Only those may be posted again (set below, once
	// the test's Redis client exists).
	unrecordedAtKill := map[string]bool{}
	var noteUnrecorded func()
	killOne := func() {
		i := rng.IntN(len(replicas))
		time.Sleep(time.Duration(300+rng.IntN(1700)) * time.Millisecond) // a random moment, not a wait for a condition
		_ = replicas[i].cmd.Process.Signal(syscall.SIGKILL)
		<-replicas[i].done
		kills = append(kills, time.Now())
		noteUnrecorded()
		replicas[i] = start(i)
	}

	// stop ends replica i with SIGTERM and waits for a clean exit. A
	// replica restarted a moment ago is first let reach its HTTP server, so
	// that the signal finds its handler installed.
	stop := func(i int) {
		t.Helper()
		r := replicas[i]
		waitFor(t, 30*time.Second, "the replica's /healthz", func() bool {
			resp, err := http.Get("http://" + metrics[i] + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-r.done:
			if err != nil {
				// The replica is restarted with fresh logs: keep these.
				path := filepath.Join(os.TempDir(), fmt.Sprintf("fraudwatch-crash-replica-%d-stopped.log", i))
				_ = os.WriteFile(path, []byte(r.logs.String()), 0o600)
				t.Errorf("replica exit after SIGTERM: %v (full log in %s)\n%s", err, path, tail(r.logs))
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("replica did not stop\n%s", tail(r.logs))
		}
	}

	var rdb redis.UniversalClient
	if cluster != nil {
		rdb = cluster.Client(t)
	} else {
		rdb = redistest.Client(t)
	}
	// The counting keys as the binary names them: its redis.buckets'
	// default on this Redis.
	keys, err := lua.NewKeysIn(prefix, config.Redis{Cluster: cluster != nil}.CountingBuckets())
	if err != nil {
		t.Fatal(err)
	}
	// An alert's keys take its group's bucket among all of them, whatever
	// the counting keys' number (docs/design.md, Keys).
	alertKeys, err := lua.NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := config.ParseRules([]byte(crashRules), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	for _, r := range rs {
		state[r.Name] = r.State()
	}
	counter := func(rule, value string) int64 {
		n, err := countOf(redistest.FixedCount(context.Background(), rdb, keys.Counter(keys.Group([]string{value}), state[rule])))
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		return n
	}
	// A sliding window's value is the sum of its buckets, all within the
	// hour here.
	sliding := func(customer string) int64 {
		fields, err := rdb.HGetAll(context.Background(), keys.Window(keys.Group([]string{customer}), state["sliding-orders-per-customer"])).Result()
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for f, v := range fields {
			if _, err := strconv.ParseInt(f, 10, 64); err == nil {
				n, _ := strconv.ParseInt(v, 10, 64)
				sum += n
			}
		}
		return sum
	}
	devices := func(customer string) int64 {
		n, err := rdb.ZCard(context.Background(), keys.Values(keys.Group([]string{customer}), state["devices-per-customer"])).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// An alert's record for Slack is prefix:{tag}:r:rule:group:id:slack,
	// a hash whose state says how it ended.
	recordPrefix := func(key string) string {
		rule, value, _ := strings.Cut(key, " ")
		g := alertKeys.Group([]string{value})
		return prefix + ":" + g.Tag() + ":r:" + rule + ":" + g.Encoding() + ":"
	}
	noteUnrecorded = func() {
		slack.mu.Lock()
		posted := slices.Collect(maps.Keys(slack.posts))
		slack.mu.Unlock()
		records := redistest.Keys(t, rdb, prefix+":*:r:*")
		pipe := rdb.Pipeline()
		states := make([]*redis.StringCmd, len(records))
		for i, r := range records {
			states[i] = pipe.HGet(context.Background(), r, "state")
		}
		_, _ = pipe.Exec(context.Background())
		for _, key := range posted {
			p := recordPrefix(key)
			for i, r := range records {
				if strings.HasPrefix(r, p) && states[i].Val() != "sent" {
					unrecordedAtKill[key] = true
				}
			}
		}
	}
	// Below the truth: not there yet. Above it: counted twice, and no
	// amount of waiting will mend that.
	countsMatch := func() bool {
		ok := true
		for customer, want := range world.count {
			got, slid, devs := counter("orders-per-customer", customer), sliding(customer), devices(customer)
			if got > want || slid > want {
				t.Fatalf("%s counted %d orders (sliding %d), truth %d: an event counted twice", customer, got, slid, want)
			}
			ok = ok && got == want && slid == want && devs == world.devices[customer]
		}
		return ok
	}
	amountsMatch := func() bool {
		for card, want := range world.amount {
			if counter("amount-per-card", card) != want {
				return false
			}
		}
		return true
	}

	// On a timeout, say how far it got and what the replicas said.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var counted, want int64
		for customer, n := range world.count {
			counted += counter("orders-per-customer", customer)
			want += n
		}
		t.Logf("orders counted %d of %d; kills at %v", counted, want, kills)
		for i, r := range replicas {
			// SIGQUIT makes a Go process print every goroutine's stack.
			_ = r.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-r.done:
			case <-time.After(10 * time.Second):
			}
			path := filepath.Join(os.TempDir(), fmt.Sprintf("fraudwatch-crash-replica-%d.log", i))
			_ = os.WriteFile(path, []byte(r.logs.String()), 0o600)
			t.Logf("replica %d: full log with goroutine dump in %s; its end:\n%s", i, path, tail(r.logs))
		}
	})

	k.Produce(t, orders, world.orders...)
	resharded := make(chan error, 1)
	if cluster != nil {
		go func() {
			start := time.Now()
			resharded <- cluster.Reshard(context.Background(), 4000)
			t.Logf("4000 slots moved between masters in the %v after the orders were produced", time.Since(start).Round(time.Millisecond))
		}()
	} else {
		resharded <- nil
	}
	for range 3 {
		killOne()
	}
	// A graceful leave and a join under load, then a crash again.
	leaver := rng.IntN(len(replicas))
	stop(leaver)
	replicas[leaver] = start(leaver)
	killOne()
	if err := <-resharded; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "every order counted once", countsMatch)
	k.Produce(t, refunds, world.refunds...)
	for range 2 {
		killOne()
	}
	waitFor(t, 3*time.Minute, "every refund applied once", amountsMatch)
	// The silenced crossing is settled as such: its delivery record says
	// so (a replica's counter of it may die with the replica).
	g := alertKeys.Group([]string{silenced})
	records := prefix + ":" + g.Tag() + ":r:orders-per-customer:" + g.Encoding() + ":*"
	silencedRecord := func() bool {
		found, err := redistest.Keys(t, rdb, records), error(nil)
		if err != nil || len(found) != 1 {
			return false
		}
		return rdb.HGet(context.Background(), found[0], "state").Val() == "silenced"
	}
	// A digest lists at most 100 alerts; one it carried unlisted shows in
	// its delivery record.
	sentUnlisted := func(key string) bool {
		found, err := redistest.Keys(t, rdb, recordPrefix(key)+"*"), error(nil)
		return err == nil && len(found) == 1 && rdb.HGet(context.Background(), found[0], "state").Val() == "sent"
	}
	waitFor(t, 2*time.Minute, "every expected alert, and the silenced one settled", func() bool {
		if !silencedRecord() {
			return false
		}
		slack.mu.Lock()
		var unlisted []string
		for key := range world.alerts {
			if len(slack.posts[key]) == 0 {
				unlisted = append(unlisted, key)
			}
		}
		slack.mu.Unlock()
		// A rule's waiting alerts go as one digest, which may carry more
		// than it lists: those are counted by their records.
		if len(unlisted) > 200 {
			return false
		}
		for _, key := range unlisted {
			if !sentUnlisted(key) {
				return false
			}
		}
		return true
	})
	stopRewriting()
	rewrites := <-rewritesDone
	rewritesDone <- rewrites // for the cleanup
	// A clean stop drains and settles whatever is still in flight: any
	// duplicate would have been posted by the time both have exited.
	for i := range replicas {
		stop(i)
	}
	reloads := 0
	for _, r := range everyReplica {
		reloads += strings.Count(r.logs.String(), `msg="rules reloaded"`)
	}
	if reloads == 0 {
		t.Fatalf("the rules files changed %d times, and no replica reloaded them", rewrites)
	}
	t.Logf("rules files rewritten %d times, reloaded %d times by the replicas", rewrites, reloads)
	if len(kills) != 6 {
		t.Fatalf("%d kills, want 6", len(kills))
	}

	// Counters: exactly the truth (checked above, and still so).
	if !countsMatch() || !amountsMatch() {
		t.Fatal("counters drifted from the truth after the replicas stopped")
	}
	slack.mu.Lock()
	defer slack.mu.Unlock()
	if len(slack.other) > 0 {
		t.Fatalf("posts about nothing expected: %q", slack.other)
	}
	if len(slack.twice) > 0 {
		t.Fatalf("one post carried an alert twice: %v", slack.twice)
	}
	if len(slack.bare) > 0 {
		t.Errorf("alerts posted without the orders behind them: %v", slack.bare)
	}
	var missing, unexpected, doubled []string
	for key := range world.alerts {
		if len(slack.posts[key]) == 0 && !sentUnlisted(key) {
			missing = append(missing, key)
		}
	}
	for key, at := range slack.posts {
		if !world.alerts[key] {
			unexpected = append(unexpected, key)
		}
		if len(at) > 1 {
			// The one duplicate a crash can still cause: killed after
			// Slack took the post and before its outcome was recorded.
			// Then a kill after the post found it unrecorded.
			if !unrecordedAtKill[key] {
				doubled = append(doubled, key)
			} else {
				t.Logf("%s posted %d times: a replica was killed after posting it, before recording it", key, len(at))
			}
		}
	}
	sort.Strings(missing)
	sort.Strings(unexpected)
	sort.Strings(doubled)
	if len(doubled) > 0 {
		var b strings.Builder
		for _, key := range doubled {
			fmt.Fprintf(&b, "== %s posted at %v\n%s\n\n", key, slack.posts[key], strings.Join(slack.texts[key], "\n--\n"))
		}
		path := filepath.Join(os.TempDir(), "fraudwatch-crash-doubled.txt")
		_ = os.WriteFile(path, []byte(b.String()), 0o600)
		t.Logf("the doubled alerts' posts are in %s", path)
	}
	if len(missing)+len(unexpected)+len(doubled) > 0 {
		t.Fatalf("of %d expected alerts: lost %v, unexpected %v, doubled %v", len(world.alerts), missing, unexpected, doubled)
	}
	if slack.digests == 0 {
		t.Error("no digest: the flood of alerts stayed within the budget")
	}
	t.Logf("%d orders, %d refunds, 6 kills: %d alerts (%d digests), each posted once; every counter exact",
		len(world.orders), len(world.refunds), len(world.alerts), slack.digests)
}

// countOf reads a fixed window's count, field c of its hash
// (incr_and_check.lua); redis.Nil without one.
func countOf(v string, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}
