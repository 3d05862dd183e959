package event

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// eachFlat reads what it takes as jsontext does: the same members, spans
// and offsets, and it takes nothing jsontext refuses. The seeds run in the
// normal suite; each says whether eachFlat takes it.
func FuzzFlatAgrees(f *testing.F) {
	seeds := []struct {
		data string
		flat bool
	}{
		{`{"event_id":"e1","type":"order","order_id":"o1","customer_id":"c1","amount":15000}`, true},
		{" \t\r\n{ \"a\" : \"b\" , \"n\":-0.5e+10,\"t\":true,\"f\":false,\"z\":null,\"a\":1E3 }\n", true},
		{`{}`, true},
		{` { } `, true},
		{`{"a":"` + "\xff" + `"}`, true}, // invalid UTF-8 as jsontext allows it here (Decode refuses it first)
		{`{"a":"\n"}`, false},
		{`{"a":"b\"c"}`, false},
		{`{"a\u0062":1}`, false},
		{`{"a":{"b":1}}`, false},
		{`{"a":[1]}`, false},
		{`{"a":01}`, false},
		{`{"a":-}`, false},
		{`{"a":1.}`, false},
		{`{"a":1e}`, false},
		{`{"a":.5}`, false},
		{`{"a":+1}`, false},
		{`{"a":tru}`, false},
		{`{"a":truex}`, false},
		{`{"a":1,}`, false},
		{`{,"a":1}`, false},
		{`{"a" 1}`, false},
		{`{"a":1 "b":2}`, false},
		{`{"a":1} {}`, false},
		{`{"a":1} x`, false},
		{`{"a":1`, false},
		{`{"a":"b`, false},
		{"{\"a\":\"\x01\"}", false},
		{"\ufeff{}", false},
		{`[1]`, false},
		{``, false},
		{`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,` +
			`"q":17,"r":18,"s":19,"t":20,"u":21,"v":22,"w":23,"x":24,"y":25,"z":26,"A":27,"B":28,"C":29,"D":30,"E":31,"F":32}`, true},
		{`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,` +
			`"q":17,"r":18,"s":19,"t":20,"u":21,"v":22,"w":23,"x":24,"y":25,"z":26,"A":27,"B":28,"C":29,"D":30,"E":31,"F":32,"G":33}`, false},
	}
	for _, s := range seeds {
		f.Add([]byte(s.data))
	}
	flat := map[string]bool{}
	for _, s := range seeds {
		flat[s.data] = s.flat
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want []string
		record := func(to *[]string) func([]byte, json.RawMessage, int) {
			return func(name []byte, value json.RawMessage, at int) {
				*to = append(*to, fmt.Sprintf("%q=%q@%d", name, value, at))
			}
		}
		took := eachFlat(data, record(&got))
		if wantFlat, seed := flat[string(data)]; seed && took != wantFlat {
			t.Fatalf("eachFlat took %q: %v, want %v", data, took, wantFlat)
		}
		if !took {
			if len(got) > 0 {
				t.Fatalf("eachFlat refused %q after calling fn %d times", data, len(got))
			}
			return
		}
		if err := eachScanned(data, record(&want)); err != nil {
			t.Fatalf("eachFlat took %q, which jsontext refuses: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: eachFlat read\n%s\njsontext\n%s", data, strings.Join(got, " "), strings.Join(want, " "))
		}
	})
}
