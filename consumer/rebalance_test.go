package consumer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/event"
)

// The test binary doubles as a group member process, so that a member can
// be killed with SIGKILL like a crashed replica. The member prints one line
// per handled event, before its offset can be committed.
const envMember = "FRAUDWATCH_TEST_MEMBER_CONFIG"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envMember); cfg != "" {
		os.Exit(member(cfg))
	}
	os.Exit(m.Run())
}

func member(cfgJSON string) int {
	var cfg Config
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	h := perEvent(func(_ context.Context, ev *event.Event) error {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s %d %d %s\n", ev.Source.Topic, ev.Source.Partition, ev.Source.Offset, ev.EventID)
		return out.Flush()
	})
	c, err := New(cfg, h, nil, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := c.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = c.Close()
	return 0
}

// handled is one line of a member's output.
type handled struct {
	member    int
	partition int
	offset    int64
	id        string
}

type proc struct {
	id   int
	cmd  *exec.Cmd
	done chan struct{}
}

// group runs member processes and collects what they handled.
type group struct {
	t       *testing.T
	cfg     Config
	members int
	mu      sync.Mutex
	seen    []handled
}

func (g *group) start() *proc {
	g.t.Helper()
	cfgJSON, err := json.Marshal(g.cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	g.members++
	id := g.members
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envMember+"="+string(cfgJSON))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		g.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	p := &proc{id: id, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 4 {
				continue
			}
			part, _ := strconv.Atoi(f[1])
			off, _ := strconv.ParseInt(f[2], 10, 64)
			g.mu.Lock()
			g.seen = append(g.seen, handled{member: p.id, partition: part, offset: off, id: f[3]})
			g.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	g.t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	return p
}

func (g *group) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.seen)
}

func (g *group) distinct() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := map[string]bool{}
	for _, h := range g.seen {
		ids[h.id] = true
	}
	return len(ids)
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("member exited %d after SIGTERM", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("member did not stop within 30s of SIGTERM")
	}
}

// kill is a crash: no drain, no commit, no leave.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// TestRebalancesUnderLoad keeps events flowing while members join, leave
// gracefully and crash, and checks that every event was handled, in offset
// order per partition and member, and that only the crashed member's
// uncommitted events were handled twice.
func TestRebalancesUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process rebalance test")
	}
	const partitions, total = 6, 3000
	e := newEnv(t, partitions)
	g := &group{t: t, cfg: e.config()}
	g.cfg.SessionTimeout = 6 * time.Second // the broker's minimum: how long a crash goes unnoticed

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := make(chan error, 1)
	go func() { produced <- produceSlowly(ctx, e, total, partitions) }()

	a := g.start()
	waitFor(t, 30*time.Second, "the first member to consume", func() bool { return g.count() > 200 })
	b := g.start() // joins
	waitFor(t, 30*time.Second, "progress after the join", func() bool { return g.count() > 800 })
	c := g.start() // joins
	waitFor(t, 30*time.Second, "progress after the second join", func() bool { return g.count() > 1400 })
	b.stop(t) // leaves gracefully
	waitFor(t, 30*time.Second, "progress after the leave", func() bool { return g.count() > 2000 })
	c.kill() // crashes: its partitions move after the session timeout
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "every event", func() bool { return g.distinct() == total })
	a.stop(t)

	g.mu.Lock()
	defer g.mu.Unlock()
	times := map[string][]handled{}
	last := map[[2]int]int64{} // (member, partition) -> last offset
	for _, h := range g.seen {
		times[h.id] = append(times[h.id], h)
		k := [2]int{h.member, h.partition}
		redelivery := len(times[h.id]) > 1
		if prev, ok := last[k]; ok && h.offset <= prev && !redelivery {
			// Going back is only right when a rebalance handed the
			// partition back at its committed offset (a redelivery,
			// judged below); a new event at a lower offset is disorder.
			t.Errorf("member %d partition %d: new event at offset %d after %d", h.member, h.partition, h.offset, prev)
		}
		last[k] = h.offset
	}
	dups := 0
	for id, hs := range times {
		if len(hs) == 1 {
			continue
		}
		dups++
		byCrashed := false
		for _, h := range hs {
			byCrashed = byCrashed || h.member == c.id
		}
		if !byCrashed {
			t.Errorf("event %s handled %d times, never by the crashed member: a graceful rebalance redelivered it", id, len(hs))
		}
	}
	t.Logf("%d events, %d handlings, %d handled twice (the crashed member's uncommitted tail)", total, len(g.seen), dups)
}

// produceSlowly writes total events spread over the partitions, in small
// batches, so that they keep arriving while members come and go.
func produceSlowly(ctx context.Context, e *env, total, partitions int) error {
	w := &kafka.Writer{
		Addr:         kafka.TCP(e.cluster.Brokers...),
		Topic:        e.orders,
		Balancer:     &kafka.RoundRobin{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond,
	}
	defer w.Close()
	const batch = 20
	for i := 0; i < total; i += batch {
		msgs := make([]kafka.Message, 0, batch)
		for j := i; j < i+batch && j < total; j++ {
			msgs = append(msgs, kafka.Message{Value: order(fmt.Sprint("ev-", j), fmt.Sprint("c", j%50), 1)})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(15 * time.Millisecond):
		}
	}
	return nil
}

func TestWaitsForMissingTopics(t *testing.T) {
	// Each of the topics a replica needs: those it reads, the dead-letter
	// topic it writes, and one it hands off to (the alerts topic).
	for _, missing := range []string{"orders", "refunds", "dead letters", "required"} {
		t.Run(missing, func(t *testing.T) {
			// Each waits out the growing intervals between checks.
			t.Parallel()
			e := newEnv(t, 1)
			cfg := e.config()
			var late string
			switch missing {
			case "orders":
				cfg.OrdersTopic += ".later"
				late = cfg.OrdersTopic
			case "refunds":
				cfg.RefundsTopic += ".later"
				late = cfg.RefundsTopic
			case "dead letters":
				cfg.DeadLetterTopic += ".later"
				late = cfg.DeadLetterTopic
			case "required":
				late = e.orders + ".alerts"
				cfg.RequiredTopics = []string{late}
			}
			rec := newRecorder()
			r := start(t, cfg, rec)
			waitFor(t, 20*time.Second, "the missing topic to be reported", func() bool {
				return strings.Contains(r.c.Status(), "missing topics: "+late)
			})
			if r.c.Ready() {
				t.Fatal("ready without its topic")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := e.cluster.CreateTopic(ctx, late, 1); err != nil {
				t.Fatal(err)
			}
			e.cluster.ProduceTo(t, cfg.OrdersTopic, 0, order("late", "c", 1))
			waitFor(t, 30*time.Second, "the event once the topic exists", func() bool { return len(rec.ids()) == 1 })
			if !r.c.Ready() || r.c.Status() != "" {
				t.Fatalf("ready=%v status=%q once the topic exists", r.c.Ready(), r.c.Status())
			}
		})
	}
}

// The looks for missing topics grow apart from half a second to every 10 s,
// and stay there (README, Running it for real).
func TestMissingTopicsAreCheckedUpToEveryTenSeconds(t *testing.T) {
	var got []time.Duration
	var wait time.Duration
	for range 8 {
		wait = topicsBackoff(wait)
		got = append(got, wait)
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		10 * time.Second, 10 * time.Second, 10 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
}

// While topics are missing, the checks go on at growing intervals but the
// error naming them is logged once a minute, not at every check (README,
// Running it for real).
func TestMissingTopicsAreLoggedOnceAMinute(t *testing.T) {
	c := kafkatest.NewFake(t)
	e := &env{cluster: c, orders: c.Topic(t, "orders", 1), refunds: c.Topic(t, "refunds", 1), group: kafkatest.Group(t, "fw")}
	e.dlq = e.orders + ".dlq-later" // never created
	var checks atomic.Int32
	c.Fake().ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		checks.Add(1)
		return nil, nil, false
	})
	logs := runLogging(t, e.config())
	// Four checks take 0.5 + 1 + 2 s of waiting.
	waitFor(t, 20*time.Second, "four checks for the topics", func() bool { return checks.Load() >= 4 })
	if n := strings.Count(logs.String(), `"msg":"topics missing`); n != 1 {
		t.Errorf("%d error lines over %d checks, want 1:\n%s", n, checks.Load(), logs.String())
	}
	if !strings.Contains(logs.String(), `"topics":"`+e.dlq+`"`) {
		t.Errorf("the error does not name the missing topic %s:\n%s", e.dlq, logs.String())
	}
}
