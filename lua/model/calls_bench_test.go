package model

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// benchCall is one counting call the benchmarks repeat: its script's body,
// packing, keys and arguments (in the old text layout, packed once by
// packText), and where in the packing each change's offset and time (a
// bucket or milliseconds; -1 for none) are, which each round moves on so
// that every change is new, as a replay's are.
type benchCall struct {
	name    string
	body    script
	keys    []string
	packing []byte
	changes []int // each change's byte position in the packing
	timeAt  int   // a change's time, from its start; 0 for none
	events  int   // events a call: an event's changes share its offset
}

// newBenchCall is a call of script name over n windows (w), with events
// events, each a change to every window (c).
func newBenchCall(name string, n, events int, w func(i int) []string, c func(e, i int) []string) benchCall {
	var p packing
	bc := benchCall{name: name, events: events}
	switch name {
	case lua.IncrAndCheckName:
		p, bc.body = incrPacking, incrAndCheck
	case lua.SalesDecrName:
		p, bc.body = salesPacking, salesDecr
	case lua.SlideAndCheckName:
		p, bc.body, bc.timeAt = slidePacking, slideAndCheck, 17
	case lua.DistinctAndCheckName:
		p, bc.body, bc.timeAt = distinctPacking, distinctAndCheck, 17
	}
	bc.keys = []string{"{b}o"}
	args := []string{"p:0", "600"}
	if p.windows {
		args = append(args, strconv.Itoa(n))
	}
	for i := 1; i <= n; i++ {
		for k := range p.keysPer {
			bc.keys = append(bc.keys, fmt.Sprintf("{b}w%d:%d", i, k))
		}
		if p.windows {
			args = append(args, w(i)...)
		}
	}
	for e := range events {
		for i := 1; i <= n; i++ {
			bc.changes = append(bc.changes, 5+p.window*n+len(bc.changes)*p.change)
			args = append(args, c(e, i)...)
		}
	}
	bc.packing = []byte(packText(name, bc.keys, args)[1])
	return bc
}

// round moves every change of the call's packing on to round r: its
// event's offset, and its time by r.
func (bc benchCall) round(r int) string {
	le := binary.LittleEndian
	per := len(bc.changes) / bc.events
	for k, at := range bc.changes {
		le.PutUint64(bc.packing[at+1:], uint64(r*bc.events+k/per+1))
		if bc.timeAt > 0 {
			le.PutUint64(bc.packing[at+bc.timeAt:], uint64(1_000_000+r))
		}
	}
	return string(bc.packing)
}

// benchCalls are each kind's call at its largest (lua.Kind.MaxChanges
// changes), and incr_and_check's of one change, the commonest.
func benchCalls() []benchCall {
	id := func(e int) string { return fmt.Sprintf("e%07d", e) }
	return []benchCall{
		newBenchCall(lua.IncrAndCheckName, 1, 1,
			func(int) []string { return []string{"600", "1000000"} },
			func(e, i int) []string { return []string{strconv.Itoa(i), "1", id(e), "1"} }),
		newBenchCall(lua.IncrAndCheckName, 4, 128,
			func(int) []string { return []string{"600", "1000000"} },
			func(e, i int) []string { return []string{strconv.Itoa(i), "1", id(e), "1"} }),
		newBenchCall(lua.SalesDecrName, 4, 128, nil,
			func(e, i int) []string { return []string{strconv.Itoa(i), "1", id(e), "1"} }),
		newBenchCall(lua.SlideAndCheckName, 4, 128,
			func(int) []string { return []string{"100", "10", "1000000", "1200"} },
			func(e, i int) []string { return []string{strconv.Itoa(i), "1", id(e), "1", "1"} }),
		newBenchCall(lua.DistinctAndCheckName, 4, 16,
			func(i int) []string {
				kind := []string{"fixed", "sliding"}[i%2]
				return []string{kind, "600000", "0", "10000", "1200"}
			},
			func(e, i int) []string { return []string{strconv.Itoa(i), "1", id(e), "1", fmt.Sprintf("v%07d", e%8)} }),
	}
}

// BenchmarkCountingCall times each counting script's body on a call, every
// change new. A round's packing (string(bc.packing)) is one of its
// allocations, as the replay's hook makes one a call.
func BenchmarkCountingCall(b *testing.B) {
	for _, bc := range benchCalls() {
		b.Run(fmt.Sprintf("%s/%d_changes", bc.name, len(bc.changes)), func(b *testing.B) {
			s := New(time.Unix(1_000_000, 0))
			b.ReportAllocs()
			r := 0
			for b.Loop() {
				args := argv{"p:0", bc.round(r)}
				if bc.name == lua.IncrAndCheckName {
					args = append(args, "", "") // no entries
				}
				reply, err := bc.body(s, bc.keys, args)
				if err != nil {
					b.Fatal(err)
				}
				if got := reply.([]int64); len(got) != 2*len(bc.changes) {
					b.Fatalf("reply %v", got)
				}
				r++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(bc.changes)), "ns/change")
		})
	}
}
