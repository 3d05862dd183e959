package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterServers is a private Redis Cluster of masters, each with a
// replica, that a test may reshard or break without disturbing the tests
// that share the one of make test-cluster, or that the bench measures.
type ClusterServers struct {
	Addrs   []string
	servers []*Server
}

// StartCluster starts a private Redis Cluster of 3 masters on free
// loopback ports, stopped when t ends.
func StartCluster(t testing.TB) *ClusterServers {
	t.Helper()
	c, err := NewCluster(t.TempDir(), 3)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(c.Stop)
	return c
}

// NewCluster starts a Redis Cluster of masters, each with a replica, on
// free loopback ports, with its files in dir. The caller stops it.
func NewCluster(dir string, masters int) (*ClusterServers, error) {
	if masters < 1 {
		return nil, fmt.Errorf("redistest: a cluster needs a master, not %d", masters)
	}
	if _, err := exec.LookPath(cliProgram()); err != nil {
		return nil, fmt.Errorf("%s not found: %w", cliProgram(), err)
	}
	c := &ClusterServers{}
	for i := range 2 * masters {
		node := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(node, 0o755); err != nil {
			return nil, err
		}
		// Started as a cluster node at once, on a port whose bus port
		// is free too: stopping a node to restart it as one, as before,
		// let another process take its port in between. A try that
		// failed may have written the node's configuration, which names
		// its port: the next starts without it.
		conf := filepath.Join(node, "nodes.conf")
		pick := func() (int, error) {
			if err := os.Remove(conf); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, err
			}
			return freeClusterPort()
		}
		s, err := startWith(node, pick, []string{"--cluster-enabled", "yes", "--cluster-config-file", conf,
			"--cluster-node-timeout", "2000", "--repl-diskless-sync-delay", "0"})
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.servers = append(c.servers, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	create := c.create
	if masters < 3 {
		create = c.assemble // redis-cli --cluster create refuses fewer than 3 masters
	}
	if err := create(masters); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.waitHealthy(30 * time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// create makes the nodes a cluster as an operator would, with redis-cli.
func (c *ClusterServers) create(int) error {
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	if out, err := exec.Command(cliProgram(), append(args, "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput(); err != nil {
		return fmt.Errorf("redistest: %s --cluster create: %w\n%s", cliProgram(), err, out)
	}
	return nil
}

// assemble makes the nodes a cluster by hand, as redis-cli would: the
// first masters nodes share the slots, each of the others replicates one.
func (c *ClusterServers) assemble(masters int) error {
	ctx := context.Background()
	clients := make([]*redis.Client, len(c.servers))
	for i, s := range c.servers {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		defer clients[i].Close()
	}
	const slots = 16384
	ids := make([]string, masters)
	for i := range masters {
		lo, hi := i*slots/masters, (i+1)*slots/masters-1
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("redistest: cluster addslotsrange on %s: %w", c.Addrs[i], err)
		}
		if err := clients[i].Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("redistest: cluster set-config-epoch on %s: %w", c.Addrs[i], err)
		}
		id, err := clients[i].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("redistest: cluster myid on %s: %w", c.Addrs[i], err)
		}
		ids[i] = id
	}
	host, port, _ := strings.Cut(c.Addrs[0], ":")
	for i := 1; i < len(clients); i++ {
		if err := clients[i].ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("redistest: cluster meet from %s: %w", c.Addrs[i], err)
		}
	}
	// A node replicates only a master it knows.
	for i := masters; i < len(clients); i++ {
		master := ids[i-masters]
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := clients[i].Do(ctx, "CLUSTER", "REPLICATE", master).Err()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("redistest: cluster replicate on %s: %w", c.Addrs[i], err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// Masters are the addresses of the nodes that serve slots now.
func (c *ClusterServers) Masters(ctx context.Context) ([]string, error) {
	ms, err := c.masters(ctx)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(ms))
	for i, m := range ms {
		addrs[i] = m.addr
	}
	return addrs, nil
}

// waitHealthy waits until every node reports the cluster ok and knows all
// six nodes connected.
func (c *ClusterServers) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ok := true
		for _, s := range c.servers {
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
			info, err1 := rdb.ClusterInfo(context.Background()).Result()
			nodes, err2 := rdb.ClusterNodes(context.Background()).Result()
			repl, err3 := rdb.Info(context.Background(), "replication").Result()
			_ = rdb.Close()
			// Every node agrees: all connected, half of them replicas, and
			// every replica in sync (one that never was cannot take over).
			if err1 != nil || err2 != nil || err3 != nil || !strings.Contains(info, "cluster_state:ok") ||
				strings.Count(nodes, " connected") != len(c.servers) || strings.Count(nodes, "slave ") != len(c.servers)/2 ||
				strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: the cluster on %v is not healthy after %v", c.Addrs, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Client returns a cluster client of it, closed when t ends.
func (c *ClusterServers) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Stop kills every node.
func (c *ClusterServers) Stop() {
	for _, s := range c.servers {
		s.Stop()
	}
}

// master is a master node as CLUSTER NODES lists it.
type master struct {
	id, addr string
	slots    int
}

func (c *ClusterServers) masters(ctx context.Context) ([]master, error) {
	rdb := redis.NewClient(&redis.Options{Addr: c.Addrs[0], MaxRetries: -1})
	defer rdb.Close()
	out, err := rdb.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var ms []master
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		m := master{id: f[0], addr: addr}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, found := strings.Cut(r, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if found {
				b, _ = strconv.Atoi(hi)
			}
			m.slots += b - a + 1
		}
		if m.slots > 0 {
			ms = append(ms, m)
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].slots > ms[j].slots })
	return ms, nil
}

// Reshard moves n slots, keys and all, from the master holding the most
// to the one holding the fewest, with redis-cli as an operator would; it
// returns when they are moved.
func (c *ClusterServers) Reshard(ctx context.Context, n int) error {
	ms, err := c.masters(ctx)
	if err != nil {
		return err
	}
	if len(ms) < 2 {
		return fmt.Errorf("redistest: %d masters to reshard between", len(ms))
	}
	from, to := ms[0], ms[len(ms)-1]
	cmd := exec.CommandContext(ctx, cliProgram(), "--cluster", "reshard", from.addr,
		"--cluster-from", from.id, "--cluster-to", to.id, "--cluster-slots", strconv.Itoa(n), "--cluster-yes")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("redistest: reshard %d slots %s -> %s: %v\n%s", n, from.addr, to.addr, err, out.String())
	}
	return c.waitHealthy(30 * time.Second)
}

// KillMaster kills the master holding the most slots with SIGKILL, as a
// crashed machine would go, and waits until its replica has taken its
// slots over. It returns how long that took.
func (c *ClusterServers) KillMaster(ctx context.Context) (time.Duration, error) {
	ms, err := c.masters(ctx)
	if err != nil || len(ms) == 0 {
		return 0, fmt.Errorf("redistest: no master to kill: %v", err)
	}
	var victim *Server
	for _, s := range c.servers {
		if s.Addr == ms[0].addr {
			victim = s
		}
	}
	if victim == nil {
		return 0, fmt.Errorf("redistest: master %s is none of ours", ms[0].addr)
	}
	killed := time.Now()
	victim.Stop()
	for {
		var alive *Server
		for _, s := range c.servers {
			if s != victim {
				alive = s
				break
			}
		}
		rdb := redis.NewClient(&redis.Options{Addr: alive.Addr, MaxRetries: -1})
		info, err1 := rdb.ClusterInfo(ctx).Result()
		nodes, err2 := rdb.ClusterNodes(ctx).Result()
		_ = rdb.Close()
		// Taken over: the victim marked failed, and as many other masters
		// as there were serve every slot.
		masters, failed := 0, false
		for _, line := range strings.Split(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			if addr == victim.Addr {
				failed = strings.Contains(f[2], "fail") && !strings.Contains(f[2], "fail?")
			} else if len(f) > 8 && strings.Contains(f[2], "master") {
				masters++
			}
		}
		if err1 == nil && err2 == nil && strings.Contains(info, "cluster_state:ok") && failed && masters == len(ms) {
			return time.Since(killed), nil
		}
		if time.Since(killed) > 60*time.Second {
			var logs strings.Builder
			for _, s := range c.servers {
				_, port, _ := strings.Cut(s.Addr, ":")
				data, _ := os.ReadFile(filepath.Join(s.dir, "redis-"+port+".log"))
				lines := strings.Split(strings.TrimSpace(string(data)), "\n")
				fmt.Fprintf(&logs, "== %s\n%s\n", s.Addr, strings.Join(lines[max(0, len(lines)-8):], "\n"))
			}
			return 0, fmt.Errorf("redistest: no replica took over from %s within a minute; %s says:\n%s\n%s\n%s", victim.Addr, alive.Addr, info, nodes, logs.String())
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
