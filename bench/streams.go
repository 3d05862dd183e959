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
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// streamsDir is the Kafka Streams contender's Maven project, and
// streamsJar what it builds (its dependencies beside it, in lib/).
const (
	streamsDir = "bench/streams"
	streamsJar = streamsDir + "/target/fraudwatch-bench-streams.jar"
)

// kafkaStreams runs contender (e): the same four rules as a Kafka Streams
// application (bench/streams), what a Kafka shop would write instead of
// fraudwatch. It has windowed aggregations in RocksDB stores with
// changelogs, the per-card and per-IP rules behind repartition topics,
// exactly_once_v2, two stream threads, and first crossings to an output
// topic. It reads topics from the start under the fresh application.id
// appID. It reports its peak RSS, and its rate from its first input record
// until the n-th has gone through all four rules. The jar is built with
// Maven when it is missing or older than its sources.
func kafkaStreams(ctx context.Context, brokers []string, topics []string, appID string, n int) (perSec float64, rss int64, err error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return 0, 0, fmt.Errorf("kafka streams: no java on PATH (Java 17 or newer runs the Kafka Streams contender)")
	}
	if err := buildStreams(ctx); err != nil {
		return 0, 0, err
	}
	args := []string{"-Xmx512m", "-jar", streamsJar, "--brokers", strings.Join(brokers, ","),
		"--app-id", appID, "--events", strconv.Itoa(n)}
	cmd := exec.CommandContext(ctx, java, append(args, topics...)...)
	// Interrupted: SIGTERM, so that its shutdown hook leaves the group.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 40 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("kafka streams: %w", err)
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		switch f := strings.Fields(sc.Text()); {
		case len(f) == 2 && f[0] == "events_per_sec":
			perSec, err = strconv.ParseFloat(f[1], 64)
		case len(f) == 2 && f[0] == "rss_bytes":
			rss, err = strconv.ParseInt(f[1], 10, 64)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("kafka streams: %q: %w", sc.Text(), err)
		}
	}
	if perSec <= 0 || rss <= 0 {
		return 0, 0, fmt.Errorf("kafka streams: no events_per_sec and rss_bytes in its output %q", out.String())
	}
	return perSec, rss, nil
}

// buildStreams builds the jar unless it is newer than the pom and every
// source.
func buildStreams(ctx context.Context) error {
	jar, err := os.Stat(streamsJar)
	stale := err != nil
	if !stale {
		err := filepath.WalkDir(streamsDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path == filepath.Join(streamsDir, "target") {
				return filepath.SkipDir
			}
			if info, err := d.Info(); err == nil && !d.IsDir() && info.ModTime().After(jar.ModTime()) {
				stale = true
				return filepath.SkipAll
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("kafka streams: %w", err)
		}
	}
	if !stale {
		return nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return errors.New("kafka streams: no mvn on PATH to build " + streamsJar + " (install Maven, e.g. apt-get install maven)")
	}
	progress("(e) building %s with Maven (the first time downloads Kafka Streams and RocksDB)", streamsJar)
	began := time.Now()
	// Maven 3.8's -q still prints colour codes: its output is shown only
	// when it failed, without them.
	out, err := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", streamsDir+"/pom.xml", "package", "-DskipTests").CombinedOutput()
	if err != nil {
		os.Stderr.Write(regexp.MustCompile(`\x1b\[[0-9;]*m`).ReplaceAll(out, nil))
		return fmt.Errorf("kafka streams: build %s: %w", streamsJar, err)
	}
	progress("(e) built in %v", time.Since(began).Round(time.Millisecond))
	return nil
}
