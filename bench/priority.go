package main

import (
	"context"
	"fmt"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// favourRedis sets the niceness of rdb's server (its main thread, which
// runs every command) to nice, when it runs on this machine, and returns
// what sets it back. Production's Redis has cores of its own; here it
// shares two with the broker, the bench's producer and fraudwatch, and at
// half (b)'s rate it waited for a core a fifth to a quarter of every second
// (docs/performance.md, Latency at half load). A negative nice needs
// CAP_SYS_NICE: without it, or with Redis elsewhere, nothing changes and
// the returned note says so.
func favourRedis(ctx context.Context, rdb *redis.Client, nice int) (restore func(), note string, err error) {
	restore = func() {}
	if nice == 0 {
		return restore, "", nil
	}
	pid := redisPid(ctx, rdb)
	if pid == 0 {
		return restore, "redis-server is not on this machine: its priority is left alone", nil
	}
	// The raw getpriority answers 20 - nice, so that it is never negative.
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, pid)
	if err != nil {
		return restore, "", fmt.Errorf("read redis-server's priority: %w", err)
	}
	was := 20 - prio
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, pid, nice); err != nil {
		return restore, fmt.Sprintf("redis-server's nice could not be set to %d (%v): left at %d", nice, err, was), nil
	}
	return func() { _ = syscall.Setpriority(syscall.PRIO_PROCESS, pid, was) }, fmt.Sprintf("redis-server at nice %d (from %d)", nice, was), nil
}
