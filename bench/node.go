package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/lua/seedbench"
)

// nodeDir holds contender (d), relative to the repository root the bench
// runs from.
var nodeDir = filepath.Join("bench", "node")

// nodeConsumer runs contender (d), the case study's stack: a Node.js
// consumer on kafkajs's eachMessage and ioredis's defineCommand, as the
// typical Korean e-commerce write-up builds it (bench/node/consumer.js).
// Its Redis work is exactly (c)'s: the same seed-style scripts (handed over
// in its environment), keys, rules and thresholds, one awaited call per
// rule. Only the stack and its defaults differ, kept as such a write-up
// keeps them: one partition at a time, and autoCommit once per fetched
// batch where (c) commits every message. So fraudwatch is compared with
// what gets deployed, not only with a Go consumer written for the bench.
// It processes the first n events of topics in group and reports its rate
// from the first message to the n-th.
func nodeConsumer(ctx context.Context, brokers []string, redisAddr, group, prefix string, topics []string, n int) (float64, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return 0, fmt.Errorf("node consumer: Node.js is needed for contender (d) and there is no node on PATH: %w", err)
	}
	if err := nodeInstall(ctx); err != nil {
		return 0, err
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, "node", filepath.Join(nodeDir, "consumer.js"))
	cmd.Env = append(os.Environ(),
		"FRAUDWATCH_NODE_BROKERS="+strings.Join(brokers, ","),
		"FRAUDWATCH_NODE_REDIS_ADDR="+redisAddr,
		"FRAUDWATCH_NODE_GROUP="+group,
		"FRAUDWATCH_NODE_PREFIX="+prefix,
		"FRAUDWATCH_NODE_TOPICS="+strings.Join(topics, ","),
		"FRAUDWATCH_NODE_EVENTS="+strconv.Itoa(n),
		"FRAUDWATCH_NODE_INCR_SCRIPT="+seedbench.Script(),
		"FRAUDWATCH_NODE_REFUND_SCRIPT="+seedRefund,
	)
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("node consumer: %w", err)
	}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "events_per_sec "); ok {
			rate, err := strconv.ParseFloat(v, 64)
			if err != nil || rate <= 0 {
				return 0, fmt.Errorf("node consumer: bad rate %q", v)
			}
			return rate, nil
		}
	}
	return 0, fmt.Errorf("node consumer: no events_per_sec line in its output %q", stdout.String())
}

// nodeInstall installs the consumer's packages from package-lock.json with
// npm ci when node_modules is missing or older than the lock. npm writes
// node_modules/.package-lock.json last, so its time is that of the last
// install that finished.
func nodeInstall(ctx context.Context) error {
	lock, err := os.Stat(filepath.Join(nodeDir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("node consumer: %w (run the bench from the repository root)", err)
	}
	installed, err := os.Stat(filepath.Join(nodeDir, "node_modules", ".package-lock.json"))
	if err == nil && !installed.ModTime().Before(lock.ModTime()) {
		return nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("node consumer: %w", err)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return fmt.Errorf("node consumer: npm is needed to install contender (d)'s packages and there is no npm on PATH: %w", err)
	}
	progress("(d) npm ci in %s", nodeDir)
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = nodeDir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("node consumer: npm ci in %s: %w", nodeDir, err)
	}
	return nil
}
