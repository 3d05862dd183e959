package lua

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// packing is a packed ARGV[2] made by hand, malformed ones included: each
// value in its field's width, little-endian.
type packing []byte

func (p packing) u8(v int) packing    { return append(p, byte(v)) }
func (p packing) u16(v int) packing   { return binary.LittleEndian.AppendUint16(p, uint16(v)) }
func (p packing) u32(v int64) packing { return binary.LittleEndian.AppendUint32(p, uint32(v)) }
func (p packing) i64(v int64) packing { return binary.LittleEndian.AppendUint64(p, uint64(v)) }
func (p packing) id(s string) packing { return append(p, s...) }

// change is an incr_and_check or sales_decr change.
func (p packing) change(i int, offset int64, id string, amount int64) packing {
	return p.u8(i).i64(offset).id(id).i64(amount)
}

// The Go side packs what the scripts take, and refuses a call whose
// thresholds or amounts a double cannot hold exactly.
func TestPackingsAreTheScriptsLayouts(t *testing.T) {
	w := Window{Key: "{t}:w", Marks: "{t}:m", Length: time.Minute, Threshold: 10, Keep: 5, From: 6}
	id := IDOf("a")
	ch := Change{Window: 0, Offset: 7, ID: id, Amount: 3}
	got, err := packCount(nil, time.Hour, []Window{w}, []Change{ch, {Window: 5, Offset: 8, ID: id, Amount: 1}})
	want := packing{}.u32(3600).u8(1).u32(60).i64(10).u8(5).i64(6).change(1, 7, string(id[:]), 3).change(0, 8, string(id[:]), 1)
	if err != nil || string(got) != string(want) {
		t.Fatalf("packCount = %x, %v; want %x (a change to no window as index 0)", got, err, want)
	}
	if len(got) != countHead+countWindow+2*countChange {
		t.Fatalf("%d bytes", len(got))
	}
	for _, tc := range []struct {
		name string
		pack func() ([]byte, error)
	}{
		{"a threshold of 2^53", func() ([]byte, error) {
			big := w
			big.Threshold = 1 << 53
			return packCount(nil, time.Hour, []Window{big}, []Change{ch})
		}},
		{"an increment of 2^53", func() ([]byte, error) {
			big := ch
			big.Amount = 1 << 53
			return packCount(nil, time.Hour, []Window{w}, []Change{big})
		}},
		{"a refund of 2^53", func() ([]byte, error) {
			big := ch
			big.Amount = 1 << 53
			return packRefund(nil, time.Hour, []Window{w}, []Change{big})
		}},
		{"a sliding threshold of 2^53", func() ([]byte, error) {
			big := w
			big.Threshold = 1 << 53
			return packSlide(nil, time.Hour, []Window{big}, []Change{ch})
		}},
		{"a sliding refund of 2^53", func() ([]byte, error) {
			big := ch
			big.Amount = -1 << 53
			return packSlide(nil, time.Hour, []Window{w}, []Change{big})
		}},
	} {
		if _, err := tc.pack(); err == nil || !strings.Contains(err.Error(), "2^53") {
			t.Errorf("%s: %v, want refused", tc.name, err)
		}
	}
	got, err = packDistinct(nil, time.Hour, []Window{{Length: time.Minute, Threshold: 3, Sliding: true, Lateness: time.Second}},
		[]Change{{Offset: 1, ID: id, At: 5, Value: IDOf("v")}})
	v := IDOf("v")
	want = packing{}.u32(3600).u8(1).u8(2).i64(60000).i64(1000).u16(3).u32(122).
		u8(1).i64(1).id(string(id[:])).i64(5).id(string(v[:]))
	if err != nil || string(got) != string(want) {
		t.Fatalf("packDistinct = %x, %v; want %x", got, err, want)
	}
}

// A key has a call's tag, by its head or read, exactly when hashTag says
// the two keys share it.
func TestKeyTagIsHashTag(t *testing.T) {
	keys := []string{"fw:{3F}:f:r:c1", "fw:{3F}:x:r:c2", "fw:{3F}:o", "fw:{4A}:f:r:c1", "gw:{3F}:f:r:c1", "{3F}", "{3F",
		"fw:{3F", "fw:{}:f", "fw:{}:{3F}", "fw", "", "x{3F}}", "{{3F}", "fw:{3F}}", "fw:{3G}:f", "3F"}
	for _, a := range keys {
		for _, b := range keys {
			if got, want := tagOf(a).of(b), hashTag(a) == hashTag(b); got != want {
				t.Errorf("tagOf(%q).of(%q) = %v, want %v", a, b, got, want)
			}
		}
	}
}

// An event's changes share its entry, sent once; each change's span says
// where its entry is; an entry the script would not keep is refused here.
func TestEntriesArePackedOnceAnEvent(t *testing.T) {
	cs := []Change{{Entry: "ab"}, {Entry: "ab"}, {Entry: "cd"}, {Entry: ""}, {Entry: "ab"}}
	texts, spans, err := packEntries(nil, nil, cs)
	want := packing{}.u32(0).u32(2).u32(0).u32(2).u32(2).u32(4).u32(4).u32(4).u32(4).u32(6)
	if err != nil || string(texts) != "abcdab" || string(spans) != string(want) {
		t.Fatalf("packEntries = %q, %x, %v; want \"abcdab\", %x", texts, spans, err, want)
	}
	for _, bad := range []string{"a\x1eb", strings.Repeat("e", MaxEvidenceText+1)} {
		if _, _, err := packEntries(nil, nil, []Change{{Entry: bad}}); !errors.Is(err, ErrInvalidArguments) {
			t.Fatalf("entry of %d bytes: %v, want ErrInvalidArguments", len(bad), err)
		}
	}
}
