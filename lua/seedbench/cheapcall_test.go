package seedbench

import (
	"context"
	"embed"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// Issue 40's experiment, "a cheaper call": variants of incr_and_check
// (cheapcall/*.lua) measured side by side with today's script, the
// seed-style script and the floor (calls that do nothing), under
// seedbench's load, a private redis-server each, from each server's own
// commandstats. It runs only when asked:
//
//	go test -run TestCheapCall -v ./lua/seedbench -cheapcall [-cheapcall.for 20s]
//
// with the redis-server on PATH (Redis 8.2: PATH=$(scripts/redis8.sh fetch):$PATH).
var (
	cheapCall       = flag.Bool("cheapcall", false, "run issue 40's side-by-side experiment of incr_and_check's variants")
	cheapCallFor    = flag.Duration("cheapcall.for", 10*time.Second, "how long each load of the experiment is measured")
	cheapCallAlso   = flag.String("cheapcall.also", "", "a directory of more scripts to measure: text-*.lua take the text arguments of before the packing, struct-*.lua struct.lua's, offsets-*.lua offsets.lua's, today-*.lua incr_and_check's own (prelude included)")
	cheapCallAmount = flag.Int64("cheapcall.amount", 1, "every change's increment (a sum rule's are amounts, which a packed call must have Redis format)")
	cheapCallOnly   = flag.Bool("cheapcall.only", false, "measure the seed-style script and -cheapcall.also's scripts alone")
)

//go:embed cheapcall/*.lua
var variantScripts embed.FS

// variant is a script and how a call of incr_and_check's is sent to it:
// each call's KEYS and ARGV (several calls a Count for the seed-style
// script, one a change).
type variant struct {
	name, file string
	encode     func(c *lua.Call) [][2][]any
	// works is whether its replies must count as the seed-style script's:
	// the floors do nothing.
	works bool
}

func variants() ([]variant, error) {
	vs := []variant{
		{"seed-style", "", seedCalls, true},
		{"floor, the seed-style call's arguments", "floor.lua", seedCalls, false},
		{"incr_and_check today", "", todayCall, true},
		{"floor, today's arguments", "floor.lua", textCall, false},
		{"(c) today's arguments, numbers checked by tonumber", "numbers.lua", textCall, true},
		{"(a) struct-packed arguments", "struct.lua", structCall, true},
		{"floor, struct-packed arguments", "floor.lua", structCall, false},
		{"(d) (a), its offset by SET … GET", "offsets.lua", offsetsCall, true},
		{"(b) MessagePack arguments", "msgpack.lua", msgpackCall, true},
		{"bound: today's commands alone, unchecked", "bare.lua", textCall, true},
	}
	if *cheapCallOnly {
		vs = vs[:1]
	}
	if *cheapCallAlso == "" {
		return vs, nil
	}
	files, err := filepath.Glob(filepath.Join(*cheapCallAlso, "*.lua"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		name := filepath.Base(f)
		switch {
		case strings.HasPrefix(name, "text-"):
			vs = append(vs, variant{name, f, textCall, false})
		case strings.HasPrefix(name, "struct-"):
			vs = append(vs, variant{name, f, structCall, false})
		case strings.HasPrefix(name, "today-"):
			vs = append(vs, variant{name, f, todayCall, false})
		case strings.HasPrefix(name, "carry-"):
			vs = append(vs, variant{name, f, carryCall, false})
		case strings.HasPrefix(name, "offsets-"):
			vs = append(vs, variant{name, f, offsetsCall, false})
		}
	}
	return vs, nil
}

func (v variant) source() (string, error) {
	if v.file == "" {
		if strings.HasPrefix(v.name, "seed") {
			return Script(), nil
		}
		text, _ := lua.Text(lua.IncrAndCheckName)
		return text, nil
	}
	if filepath.IsAbs(v.file) || strings.Contains(v.file, "/") {
		b, err := os.ReadFile(v.file)
		return string(b), err
	}
	b, err := variantScripts.ReadFile("cheapcall/" + v.file)
	return string(b), err
}

// seedCalls are the seed-style script's calls of c's changes, one each.
func seedCalls(c *lua.Call) [][2][]any {
	var calls [][2][]any
	for _, ch := range c.Changes {
		w := c.Windows[ch.Window]
		calls = append(calls, [2][]any{{w.Key}, {ch.Amount, int64(w.Length / time.Second), w.Threshold}})
	}
	return calls
}

// structCall is c packed as struct.lua reads it, and as incr_and_check
// took it when it was ported (lua/pack.go).
func structCall(c *lua.Call) [][2][]any { return packedCall(c, false) }

// todayCall is c packed as incr_and_check takes it now: structCall's
// layout and, since a fixed window may hold its evidence (issue 40), a
// flag a window for whether its rule keeps some.
func todayCall(c *lua.Call) [][2][]any { return packedCall(c, true) }

func packedCall(c *lua.Call, today bool) [][2][]any {
	b := binary.LittleEndian.AppendUint32(nil, uint32(retention))
	b = append(b, byte(len(c.Windows)))
	for _, w := range c.Windows {
		b = binary.LittleEndian.AppendUint32(b, uint32(w.Length/time.Second))
		b = binary.LittleEndian.AppendUint64(b, uint64(w.Threshold))
		if today {
			// incr_and_check's since: its rule keeps no evidence (keep 0,
			// from 0)
			b = binary.LittleEndian.AppendUint64(append(b, 0), 0)
		}
	}
	for _, ch := range c.Changes {
		b = append(b, byte(ch.Window+1))
		b = binary.LittleEndian.AppendUint64(b, uint64(ch.Offset))
		b = append(b, ch.ID[:]...)
		b = binary.LittleEndian.AppendUint64(b, uint64(ch.Amount))
	}
	if today {
		return [][2][]any{{countKeys(c), {c.Source, string(b), "", ""}}} // no entries
	}
	return [][2][]any{{countKeys(c), {c.Source, string(b)}}}
}

// carryEntry is the bytes of an order's evidence entry as evidence_add
// stores it (RS, then the order's fields): what a counting call would
// carry for each change if it wrote the entries itself (issue 40's
// design A, measured again packed).
const carryEntry = 37

// carryCall is todayCall's packing with carryEntry bytes after each
// change, which a carry-*.lua script steps over or writes.
func carryCall(c *lua.Call) [][2][]any {
	call := todayCall(c)
	packed := []byte(call[0][1][1].(string))
	head := 5 + 21*len(c.Windows)
	out := append([]byte(nil), packed[:head]...)
	entry := append([]byte{30}, strings.Repeat("e", carryEntry-1)...)
	for i := range c.Changes {
		out = append(out, packed[head+25*i:head+25*(i+1)]...)
		out = append(out, entry...)
	}
	call[0][1][1] = string(out)
	return call
}

// offsetsCall is c as offsets.lua reads it: structCall's, the first key
// the offset's own.
func offsetsCall(c *lua.Call) [][2][]any {
	call := structCall(c)
	call[0][0][0] = c.Offsets + ":c:" + c.Source
	return call
}

// msgpackCall is c as msgpack.lua reads it: one MessagePack array.
func msgpackCall(c *lua.Call) [][2][]any {
	n := 2 + 2*len(c.Windows) + 4*len(c.Changes)
	b := binary.BigEndian.AppendUint32([]byte{0xdd}, uint32(n))
	b = msgpackUint(b, uint64(retention))
	b = msgpackUint(b, uint64(len(c.Windows)))
	for _, w := range c.Windows {
		b = msgpackUint(b, uint64(w.Length/time.Second))
		b = msgpackUint(b, uint64(w.Threshold))
	}
	for _, ch := range c.Changes {
		b = msgpackUint(b, uint64(ch.Window+1))
		b = msgpackUint(b, uint64(ch.Offset))
		b = append(append(b, 0xa8), ch.ID[:]...) // a string of 8 bytes
		b = msgpackUint(b, uint64(ch.Amount))
	}
	return [][2][]any{{countKeys(c), {c.Source, string(b)}}}
}

func msgpackUint(b []byte, v uint64) []byte {
	switch {
	case v < 128:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

// runner sends every variant the same calls, each to its own server.
type runner struct {
	plan     *Pair // the load: only its layout and plan
	variants []variant
	servers  []*redis.Client
	scripts  []*redis.Script
	changes  int64
}

func newRunner(t *testing.T, windows int) *runner {
	t.Helper()
	vs, err := variants()
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{plan: &Pair{cfg: Config{Windows: windows}.withDefaults()}, variants: vs}
	if err := r.plan.layOut(); err != nil {
		t.Fatal(err)
	}
	for _, v := range r.variants {
		src, err := v.source()
		if err != nil {
			t.Fatal(err)
		}
		rdb := redistest.Connect(t, redistest.Start(t).Addr)
		script := redis.NewScript(src)
		if err := script.Load(t.Context(), rdb).Err(); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		r.servers, r.scripts = append(r.servers, rdb), append(r.scripts, script)
	}
	return r
}

// step sends a pipeline's worth of calls to every variant, and checks
// that those that count counted as the seed-style script did.
func (r *runner) step(ctx context.Context) error {
	calls := r.plan.plan()
	for _, c := range calls {
		for i := range c.Changes {
			c.Changes[i].Amount = *cheapCallAmount
		}
	}
	var want []int64
	for i, v := range r.variants {
		got, err := r.send(ctx, i, calls)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		switch {
		case i == 0:
			want = got
		case v.works && fmt.Sprint(got) != fmt.Sprint(want):
			return fmt.Errorf("%s counted %v where the seed-style script counted %v", v.name, got, want)
		}
	}
	r.changes += int64(len(want))
	return nil
}

// send runs calls on variant i in pipelines of 64 calls, and returns the
// counter each change answered.
func (r *runner) send(ctx context.Context, i int, calls []*lua.Call) ([]int64, error) {
	v, rdb, script := r.variants[i], r.servers[i], r.scripts[i]
	var cmds []*redis.Cmd
	pipe := rdb.Pipeline()
	for _, c := range calls {
		for _, kv := range v.encode(c) {
			keys := make([]string, len(kv[0]))
			for j, k := range kv[0] {
				keys[j] = k.(string)
			}
			cmds = append(cmds, script.EvalSha(ctx, pipe, keys, kv[1]...))
			if pipe.Len() == pipeline {
				if _, err := pipe.Exec(ctx); err != nil {
					return nil, err
				}
			}
		}
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
	}
	var got []int64
	for _, cmd := range cmds {
		reply, err := cmd.Int64Slice()
		if err != nil || len(reply)%2 != 0 {
			return nil, errors.Join(err, fmt.Errorf("a reply %v", reply))
		}
		for j := 0; j < len(reply); j += 2 {
			if reply[j] == -1 && reply[j+1] == -1 {
				return nil, fmt.Errorf("a call refused: %v", reply)
			}
			got = append(got, reply[j])
		}
	}
	return got, nil
}

// spent is what a server spent so far: its EVALSHA calls and the µs they
// took (commandstats, wall time), and the CPU µs of its main thread (I/O
// and parsing too, but never a wait for a core another process holds).
type spent struct {
	Stat
	cpu float64
}

func (r *runner) costs(ctx context.Context) ([]spent, error) {
	out := make([]spent, len(r.servers))
	for i, rdb := range r.servers {
		info, err := rdb.InfoMap(ctx, "commandstats", "cpu").Result()
		if err != nil {
			return nil, err
		}
		if out[i].Stat, err = ParseStat(info["Commandstats"]["cmdstat_evalsha"]); err != nil {
			return nil, err
		}
		for _, f := range []string{"used_cpu_user_main_thread", "used_cpu_sys_main_thread"} {
			secs, err := strconv.ParseFloat(info["CPU"][f], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out[i].cpu += secs * 1e6
		}
	}
	return out, nil
}

func TestCheapCall(t *testing.T) {
	if !*cheapCall {
		t.Skip("issue 40's experiment runs with -cheapcall")
	}
	version := redistest.Connect(t, redistest.Start(t).Addr).InfoMap(t.Context(), "server").Val()["Server"]["redis_version"]
	t.Logf("increments of %d", *cheapCallAmount)
	t.Logf("Redis %s, %v a load; µs per window change, Redis's own (commandstats), and × the seed-style script's", version, *cheapCallFor)
	for _, windows := range []int{1, 8} {
		r := newRunner(t, windows)
		most := 0
		for _, c := range r.plan.cells {
			most = max(most, len(c))
		}
		for range len(r.plan.cells) * ((most + windows - 1) / windows) / pipeline {
			if err := r.step(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		since, err := r.costs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		r.changes = 0
		for deadline := time.Now().Add(*cheapCallFor); time.Now().Before(deadline); {
			if err := r.step(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		now, err := r.costs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		changes := float64(r.changes)
		seed, seedCPU := (now[0].Usec-since[0].Usec)/changes, (now[0].cpu-since[0].cpu)/changes
		t.Logf("%d change(s) a call, %s changes each: commandstats µs a change, × seed; main thread's CPU µs a change, × seed; µs a call", windows, strconv.FormatInt(r.changes, 10))
		for i, v := range r.variants {
			per, cpu := (now[i].Usec-since[i].Usec)/changes, (now[i].cpu-since[i].cpu)/changes
			calls := now[i].Calls - since[i].Calls
			t.Logf("  | %-44s | %6.2f | %5.2f × | %6.2f | %5.2f × | %6.2f |", v.name, per, per/seed, cpu, cpu/seedCPU,
				(now[i].Usec-since[i].Usec)/calls)
		}
	}
}
