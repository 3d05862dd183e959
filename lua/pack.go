package lua

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"
)

// The counting scripts take their numbers packed into one binary string,
// ARGV[2], which Redis's struct library unpacks in C: one argument a call
// where each number was one, each written by go-redis (about 14 % of
// fraudwatch's CPU), then checked by a Lua pattern (lua/seedbench/cheapcall
// measured a quarter less Redis time a call of 1 change). Every script's
// header gives its layout; these append it, little-endian.
//
// A value the script would refuse is packed so that it still does: a
// window index out of range as 0, a length or lifetime past uint32 as 0.
// Values Redis must have exact (thresholds, amounts) are Lua doubles once
// unpacked: from 2^53 up the call is refused here, with an error.
const (
	countHead    = 5  // lifetime uint32, n uint8
	countWindow  = 21 // length uint32, threshold int64, keep uint8, from int64
	countChange  = 25 // index uint8, offset int64, id 8 bytes, amount int64
	slideWindow  = 16 // span uint16, lateness uint16, threshold int64, ttl uint32
	slideChange  = 33 // index uint8, offset int64, id, bucket int64, amount int64
	distWindow   = 23 // kind uint8, length int64, lateness int64, threshold uint16, ttl uint32
	distChange   = 33 // index uint8, offset int64, id, time int64, value 8 bytes
	exactLimit   = 1 << 53
	distinctKind = 1 // fixed; 2 is sliding
)

// packCount appends incr_and_check's packed arguments to dst.
func packCount(dst []byte, life time.Duration, windows []Window, changes []Change) ([]byte, error) {
	dst = packHead(dst, life, len(windows))
	for i := range windows {
		w := &windows[i]
		if w.Threshold >= exactLimit {
			return nil, fmt.Errorf("lua: a threshold of %d: at most 2^53-1", w.Threshold)
		}
		dst = binary.LittleEndian.AppendUint32(dst, u32(seconds(w.Length)))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w.Threshold))
		dst = append(dst, byte(min(max(w.Keep, 0), math.MaxUint8)))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w.From))
	}
	return packChanges(dst, len(windows), changes)
}

// packEntries appends incr_and_check's entries to texts and their spans
// (start and end in texts, uint32 each) to spans, one a change: an
// event's changes share its entry, written once. A call without entries
// sends neither.
func packEntries(texts, spans []byte, changes []Change) ([]byte, []byte, error) {
	last, start := "", 0
	for i := range changes {
		e := changes[i].Entry
		if len(e) > MaxEvidenceText || strings.Contains(e, EvidenceSep) {
			return nil, nil, fmt.Errorf("lua: an evidence entry of %d bytes or holding \\x1e: at most %d: %w", len(e), MaxEvidenceText, ErrInvalidArguments)
		}
		if e != last || i == 0 {
			start = len(texts)
			texts = append(texts, e...)
			last = e
		}
		spans = binary.LittleEndian.AppendUint32(spans, uint32(start))
		spans = binary.LittleEndian.AppendUint32(spans, uint32(start+len(e)))
	}
	return texts, spans, nil
}

// packRefund appends sales_decr's packed arguments to dst: the offsets'
// lifetime and the windows, each 1 when its rule keeps evidence (its
// window a hash), then the changes as incr_and_check's.
func packRefund(dst []byte, life time.Duration, windows []Window, changes []Change) ([]byte, error) {
	dst = packHead(dst, life, len(windows))
	for i := range windows {
		dst = append(dst, hashed(&windows[i]))
	}
	return packChanges(dst, len(windows), changes)
}

// hashed is 1 when w's window is a hash (its rule keeps evidence), else 0.
func hashed(w *Window) byte {
	if w.Keep > 0 {
		return 1
	}
	return 0
}

// packChanges appends incr_and_check's and sales_decr's changes.
func packChanges(dst []byte, n int, changes []Change) ([]byte, error) {
	for i := range changes {
		ch := &changes[i]
		if ch.Amount >= exactLimit {
			return nil, fmt.Errorf("lua: an amount of %d: at most 2^53-1", ch.Amount)
		}
		dst = append(dst, index(ch.Window, n))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(ch.Offset))
		dst = append(dst, ch.ID[:]...)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(ch.Amount))
	}
	return dst, nil
}

// packSlide appends slide_and_check's packed arguments to dst: each window
// cut into Span buckets, each change's time as its bucket.
func packSlide(dst []byte, life time.Duration, windows []Window, changes []Change) ([]byte, error) {
	dst = packHead(dst, life, len(windows))
	for i := range windows {
		w := &windows[i]
		width := w.Length.Milliseconds() / Span
		if width < 1 || w.Lateness < 0 || w.Lateness > MaxLateness*w.Length {
			return nil, fmt.Errorf("lua: a sliding window of %v with lateness %v", w.Length, w.Lateness)
		}
		if w.Threshold >= exactLimit {
			return nil, fmt.Errorf("lua: a threshold of %d: at most 2^53-1", w.Threshold)
		}
		dst = binary.LittleEndian.AppendUint16(dst, Span)
		dst = binary.LittleEndian.AppendUint16(dst, uint16((w.Lateness.Milliseconds()+width-1)/width))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w.Threshold))
		dst = binary.LittleEndian.AppendUint32(dst, u32(seconds(2*(w.Length+w.Lateness))))
	}
	for i := range changes {
		ch := &changes[i]
		if ch.Window < 0 || ch.Window >= len(windows) || ch.At < 0 {
			return nil, fmt.Errorf("lua: a change to window %d at %d", ch.Window, ch.At)
		}
		if ch.Amount >= exactLimit || ch.Amount <= -exactLimit {
			return nil, fmt.Errorf("lua: an amount of %d: at most 2^53-1 either way", ch.Amount)
		}
		dst = append(dst, index(ch.Window, len(windows)))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(ch.Offset))
		dst = append(dst, ch.ID[:]...)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(ch.At/(windows[ch.Window].Length.Milliseconds()/Span)))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(ch.Amount))
	}
	return dst, nil
}

// packDistinct appends distinct_and_check's packed arguments to dst.
func packDistinct(dst []byte, life time.Duration, windows []Window, changes []Change) ([]byte, error) {
	dst = packHead(dst, life, len(windows))
	for i := range windows {
		w := &windows[i]
		kind, ttl := byte(distinctKind), w.Length
		if w.Sliding {
			kind, ttl = distinctKind+1, 2*(w.Length+w.Lateness)
		}
		threshold := uint16(0) // refused by the script
		if w.Threshold >= 1 && w.Threshold <= math.MaxUint16 {
			threshold = uint16(w.Threshold)
		}
		dst = append(dst, kind)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w.Length.Milliseconds()))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w.Lateness.Milliseconds()))
		dst = binary.LittleEndian.AppendUint16(dst, threshold)
		dst = binary.LittleEndian.AppendUint32(dst, u32(seconds(ttl)))
	}
	for i := range changes {
		ch := &changes[i]
		dst = append(dst, index(ch.Window, len(windows)))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(ch.Offset))
		dst = append(dst, ch.ID[:]...)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(ch.At))
		dst = append(dst, ch.Value[:]...)
	}
	return dst, nil
}

// packHead appends what every packing starts with: how long the marks (or
// sales_decr's offsets) live, and the number of windows.
func packHead(dst []byte, life time.Duration, n int) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, u32(seconds(life)))
	return append(dst, byte(min(n, math.MaxUint8)))
}

// index is a change's window as the scripts count it, from 1; 0, which
// they refuse, when it names none of the call's n.
func index(w, n int) byte {
	if w < 0 || w >= n {
		return 0
	}
	return byte(w + 1)
}

// u32 is a count of seconds as a uint32; 0, which the scripts refuse, past
// it or below 1.
func u32(secs int64) uint32 {
	if secs < 1 || secs > math.MaxUint32 {
		return 0
	}
	return uint32(secs)
}

// packed is room for a call's packed arguments of size bytes, cut from
// the batch's chunk rather than allocated a call at a time.
func (b *Batch) packed(size int) []byte { return cut(&b.bytes, size) }

// packedArg is a call's packing as go-redis writes it, through
// encoding.BinaryMarshaler: its bytes, without a copy. It goes in by
// pointer, into the batch's chunk of them: a []byte put in an interface
// would take an allocation of its own, its header's.
type packedArg []byte

func (p *packedArg) MarshalBinary() ([]byte, error) { return *p, nil }

// bytes adds a packing.
func (c *command) bytes(b *Batch, p []byte) {
	slot := cut(&b.packs, 1)[:1]
	slot[0] = p
	c.args = append(c.args, &slot[0])
}

// packBool is a packed boolean: 1 or 0.
func packBool(b bool) byte {
	if b {
		return 1
	}
	return 0
}
