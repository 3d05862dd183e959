package main

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
)

// Every other client of a Redis waits while a script runs, so the longest
// single call matters beside the mean: Redis's SLOWLOG keeps each command
// that ran longer than slowFrom, with its first arguments, which name the
// script (its SHA1) and its keys. The bench keeps the longest call of each
// counting script over the runs on one Redis.
const (
	slowFrom   = 200 * time.Microsecond
	slowMaxLen = 20_000
)

// slowest is the longest call of each script the runs made, and how many
// ran longer than 1 ms.
type slowest struct {
	byScript map[string]slowCall
	scripts  map[string]string // SHA1 -> script name
	dropped  bool              // SLOWLOG's ring overflowed: older calls unread
	read     int64             // the newest entry read (since), -1 before any
}

type slowCall struct {
	took       time.Duration
	keys, args int   // how many the call had
	overMS     int64 // calls of this script longer than 1 ms
}

// watchSlowlog sets Redis to log the calls longer than slowFrom, and
// returns what collects them and undoes the settings.
func watchSlowlog(ctx context.Context, rdb *redis.Client) (*slowest, func(), error) {
	was, err := rdb.ConfigGet(ctx, "slowlog-*").Result()
	if err != nil {
		return nil, nil, fmt.Errorf("redis config get slowlog-*: %w", err)
	}
	for k, v := range map[string]string{"slowlog-log-slower-than": strconv.FormatInt(slowFrom.Microseconds(), 10), "slowlog-max-len": strconv.Itoa(slowMaxLen)} {
		if err := rdb.ConfigSet(ctx, k, v).Err(); err != nil {
			return nil, nil, fmt.Errorf("redis config set %s: %w", k, err)
		}
	}
	s := &slowest{byScript: map[string]slowCall{}, scripts: map[string]string{}, read: -1}
	for _, name := range []string{lua.IncrAndCheckName, lua.SalesDecrName, lua.SlideAndCheckName, lua.DistinctAndCheckName, lua.EvidenceAddName} {
		if text, ok := lua.Text(name); ok {
			sum := sha1.Sum([]byte(text))
			s.scripts[hex.EncodeToString(sum[:])] = name
		}
	}
	restore := func() {
		for k, v := range was {
			_ = rdb.ConfigSet(context.WithoutCancel(ctx), k, v).Err()
		}
	}
	return s, restore, nil
}

// newestSlow is the id of the newest SLOWLOG entry, -1 when there is none.
func newestSlow(ctx context.Context, rdb *redis.Client) (int64, error) {
	logs, err := rdb.SlowLogGet(ctx, 1).Result()
	if err != nil || len(logs) == 0 {
		return -1, err
	}
	return logs[0].ID, nil
}

// since reads the SLOWLOG entries newer than id, and than any it read
// before, and keeps each script's longest.
func (s *slowest) since(ctx context.Context, rdb *redis.Client, id int64) error {
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return fmt.Errorf("redis slowlog get: %w", err)
	}
	id = max(id, s.read)
	for _, l := range logs {
		s.read = max(s.read, l.ID)
	}
	oldest := int64(-1)
	for _, l := range logs {
		if l.ID <= id {
			continue
		}
		if oldest < 0 || l.ID < oldest {
			oldest = l.ID
		}
		if len(l.Args) < 3 || !strings.EqualFold(l.Args[0], "evalsha") {
			continue
		}
		name, ok := s.scripts[l.Args[1]]
		if !ok {
			continue
		}
		c := s.byScript[name]
		if l.Duration > time.Millisecond {
			c.overMS++
		}
		if l.Duration > c.took {
			keys, _ := strconv.Atoi(l.Args[2])
			c.took, c.keys, c.args = l.Duration, keys, argCount(l.Args)
		}
		s.byScript[name] = c
	}
	if oldest > id+1 {
		s.dropped = true
	}
	return nil
}

// take reads the entries not read yet (read), or marks them read.
func (s *slowest) take(ctx context.Context, rdb *redis.Client, read bool) error {
	if read {
		return s.since(ctx, rdb, -1)
	}
	id, err := newestSlow(ctx, rdb)
	s.read = max(s.read, id)
	return err
}

// argCount is how many arguments a logged call had: SLOWLOG keeps the
// first 32, the last of them then saying how many more there were.
func argCount(args []string) int {
	n := len(args) - 3 // the command, the SHA1 and numkeys
	last := args[len(args)-1]
	if more, ok := strings.CutPrefix(last, "... ("); ok {
		if m, err := strconv.Atoi(strings.TrimSuffix(more, " more arguments)")); err == nil {
			n += m - 1
		}
	}
	return n
}

// String reads like "incr_and_check 0.61 ms (17 keys, 2,071 arguments),
// none over 1 ms; ...", the longest first.
func (s *slowest) String() string {
	if len(s.byScript) == 0 {
		return fmt.Sprintf("no counting call ran longer than %v", slowFrom)
	}
	names := slices.SortedFunc(maps.Keys(s.byScript), func(a, b string) int {
		return cmp.Compare(s.byScript[b].took, s.byScript[a].took)
	})
	parts := make([]string, len(names))
	for i, name := range names {
		c := s.byScript[name]
		over := "none"
		if c.overMS > 0 {
			over = thousands(int(c.overMS))
		}
		parts[i] = fmt.Sprintf("%s %.2f ms (%d keys, %s arguments), %s over 1 ms", name, float64(c.took)/float64(time.Millisecond),
			c.keys, thousands(c.args), over)
	}
	out := strings.Join(parts, "; ")
	if s.dropped {
		out += fmt.Sprintf(" (SLOWLOG kept the last %s calls over %v of a run)", thousands(slowMaxLen), slowFrom)
	}
	return out
}
