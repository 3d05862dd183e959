package lua_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/lua"
)

// hashTag returns the part of key Redis Cluster hashes: the text between
// the first '{' and the next '}' when it is not empty, else the whole key;
// and the index just past the closing '}' (or -1 when there is no tag).
func hashTag(key string) (tag string, end int) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key, -1
	}
	close := strings.IndexByte(key[open+1:], '}')
	if close <= 0 {
		return key, -1
	}
	return key[open+1 : open+1+close], open + 1 + close + 1
}

// slot is the Redis Cluster slot of key: CRC16/XMODEM of its hash tag
// modulo 16384, as in Redis's cluster.c keyHashSlot.
func slot(key string) uint16 {
	tag, _ := hashTag(key)
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc & 16383
}

func TestSlotMatchesRedis(t *testing.T) {
	// Answers of CLUSTER KEYSLOT from a redis-server in cluster mode.
	for key, want := range map[string]uint16{
		"somekey":              11058,
		"foo":                  12182,
		"123456789":            12739,
		"foo{hash_tag}":        2515,
		"{user1000}.following": 3443,
		"foo{}{bar}":           8363, // an empty first tag hashes the whole key
		"foo{{bar}}zap":        4015, // the tag is "{bar"
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// recordSuffix is the hashed event id that ends an alert record key.
func recordSuffix(eventID string) string {
	sum := sha256.Sum256([]byte(eventID))
	return hex.EncodeToString(sum[:16])
}

func mustKeys(t *testing.T, prefix string) lua.Keys {
	t.Helper()
	k, err := lua.NewKeys(prefix)
	if err != nil {
		t.Fatalf("NewKeys(%q): %v", prefix, err)
	}
	return k
}

// tagOf checks that every key of (rule, values) holds its group's bucket
// as its only hash tag, and the kind, the rule and the group after it, and
// returns the tag.
func tagOf(t *testing.T, k lua.Keys, prefix, rule string, values []string) string {
	t.Helper()
	g := k.Group(values)
	keys := map[string]string{
		k.Window(g, rule):   "w",
		k.Marks(g, rule):    "x",
		k.Cooldown(g, rule): "c",
		// The event id is hashed into the record key: any bytes are fine.
		k.AlertRecord(g, rule, "evt}{:1"):     "a",
		k.Record(g, rule, "evt}{:1", "slack"): "r",
	}
	var first string
	for key, kind := range keys {
		tag, end := hashTag(key)
		if end < 0 || len(tag) != 2 {
			t.Fatalf("key %q has no bucket tag", key)
		}
		if !strings.HasPrefix(key, prefix+":{"+tag+"}:"+kind+":"+rule+":") {
			t.Errorf("key %q does not read prefix, tag, kind %s, rule", key, kind)
		}
		// Nothing after the tag may look like a tag: had a value leaked a
		// brace into the key, a reader would be misled.
		if strings.ContainsAny(key[end:], "{} \t\r\n") {
			t.Errorf("key %q holds a brace or white space after its tag", key)
		}
		if first == "" {
			first = tag
		} else if tag != first {
			t.Errorf("keys of one group have tags %q and %q", first, tag)
		}
	}
	// Every rule of a group shares its slot: one script call counts an
	// event into all of them.
	if slot(k.Window(g, rule)) != slot(k.Window(g, "another-rule")) || slot(k.Window(g, rule)) != slot(k.Cooldown(g, rule)) {
		t.Errorf("keys of one group hash to different slots")
	}
	return first
}

func TestKeysShareOneTag(t *testing.T) {
	const prefix = "fw:prod"
	k := mustKeys(t, prefix)
	long := strings.Repeat("서울시 강남구 {테헤란로} 123: %7E~ \n", 10*1024/40)
	tests := [][]string{
		{"cust-42"},
		{"a{b"}, {"a}b"}, {"}{"}, {"{}"}, {"{"}, {"}"},
		{"a:b"}, {":"}, {"a b"}, {" "}, {"\t\r\n"}, {"line\nbreak"},
		{"100%"}, {"%7B"}, {"%"}, {"~"}, {"~abc"},
		{"김민준"}, {"😀"}, {"é"}, {"\x00"},
		{""}, {"", ""},
		{long}, {long, long}, {"a", long},
		{"cust-42", "card{1}", "203.0.113.9"},
	}
	for _, values := range tests {
		t.Run(fmt.Sprintf("%.30q", values), func(t *testing.T) {
			tagOf(t, k, prefix, "orders-per-customer-1m", values)
			for _, key := range []string{k.Window(k.Group(values), "r"), k.Cooldown(k.Group(values), "r")} {
				// Bounded: 10 KB values must not make 10 KB keys.
				if len(key) > len(prefix)+1+300 {
					t.Errorf("key of %d bytes for values of %d bytes", len(key), len(strings.Join(values, "")))
				}
			}
		})
	}
}

func TestKeysApartByRuleAndKind(t *testing.T) {
	k := mustKeys(t, "fw")
	g := k.Group([]string{"x"})
	seen := map[string]bool{}
	for _, rule := range []string{"rule-a", "rule-b", "a", "x", "w", "c"} {
		for _, key := range []string{k.Window(g, rule), k.Marks(g, rule), k.Cooldown(g, rule), k.AlertRecord(g, rule, "e"),
			k.Record(g, rule, "e", "slack"), k.Record(g, rule, "e", "log")} {
			if seen[key] {
				t.Errorf("two keys are %q", key)
			}
			seen[key] = true
		}
	}
	if got, want := k.Window(g, "rule-a"), "fw:{87}:w:rule-a:x"; got != want {
		t.Errorf("Window = %q, want %q (the documented form)", got, want)
	}
	if got, want := k.Cooldown(g, "rule-a"), "fw:{87}:c:rule-a:x"; got != want {
		t.Errorf("Cooldown = %q, want %q", got, want)
	}
	if k.Window(k.Group([]string{"x"}), "rule-a") != k.Window(g, "rule-a") {
		t.Error("the same group derived twice gives different keys")
	}
}

// Groups spread over every bucket, about evenly.
func TestKeysSpreadOverTheBuckets(t *testing.T) {
	k := mustKeys(t, "fw")
	count := map[string]int{}
	const groups = 100 * lua.Buckets
	for i := range groups {
		count[k.Group([]string{fmt.Sprint("cust-", i)}).Tag()]++
	}
	if len(count) != lua.Buckets {
		t.Fatalf("%d buckets used, want %d", len(count), lua.Buckets)
	}
	for tag, n := range count {
		if n < 50 || n > 150 {
			t.Errorf("bucket %s holds %d of %d groups, want about 100", tag, n, groups)
		}
	}
}

// A group's counting keys take its bucket among the Keys' buckets; its
// alerts' keys take its bucket among all lua.Buckets, so that the silence
// command, the status page and the dispatcher's claims, which set no
// buckets, name the keys the engine does whatever it counts in.
func TestFewerBucketsMoveOnlyTheCountingKeys(t *testing.T) {
	all := mustKeys(t, "fw")
	few, err := lua.NewKeysIn("fw", 16)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i := range 1000 {
		values := []string{fmt.Sprint("cust-", i)}
		g, f := all.Group(values), few.Group(values)
		if f.Bucket() >= 16 {
			t.Fatalf("group %d in bucket %d of 16", i, f.Bucket())
		}
		for name, key := range map[string][2]string{
			"Cooldown":     {all.Cooldown(g, "r"), few.Cooldown(f, "r")},
			"Silences":     {all.Silences(g, "r"), few.Silences(f, "r")},
			"RuleSilences": {all.RuleSilences(g, "r"), few.RuleSilences(f, "r")},
			"AlertRecord":  {all.AlertRecord(g, "r", "e"), few.AlertRecord(f, "r", "e")},
			"Record":       {all.Record(g, "r", "e", "slack"), few.Record(f, "r", "e", "slack")},
			"Alert":        {all.Alert(g, "r", "e"), few.Alert(f, "r", "e")},
		} {
			if key[0] != key[1] {
				t.Fatalf("%s: %q with 16 buckets, %q with all: an alert's keys must not move", name, key[1], key[0])
			}
		}
		counting := []string{few.Counter(f, "r"), few.Window(f, "r"), few.Values(f, "r"), few.Marks(f, "r"),
			few.Evidence(f, "r"), few.Offsets(f)}
		for _, key := range counting {
			if !strings.Contains(key, f.Tag()) {
				t.Fatalf("%q is not in its bucket's tag %s", key, f.Tag())
			}
		}
		if few.Counter(f, "r") != all.Counter(g, "r") {
			moved++
		}
	}
	if moved < 900 { // 15 in 16 groups are in another bucket of 16 than of 256
		t.Errorf("%d of 1000 groups' counters moved with 16 buckets, want about 940", moved)
	}
	if n := len(few.AllRuleSilences("r")); n != lua.Buckets {
		t.Errorf("AllRuleSilences lists %d keys with 16 buckets, want %d", n, lua.Buckets)
	}
}

// groupPart is the group's encoding: the last part of its window key.
func groupPart(t *testing.T, k lua.Keys, values []string) string {
	t.Helper()
	key := k.Window(k.Group(values), "r")
	return key[strings.Index(key, ":w:r:")+len(":w:r:"):]
}

func TestKeysInjective(t *testing.T) {
	k := mustKeys(t, "fw")
	long := strings.Repeat("x", 500)
	pairs := [][2][]string{
		{{"a:b", "c"}, {"a", "b:c"}},
		{{"a%3Ab"}, {"a:b"}},
		{{"a%3Ab", "c"}, {"a", "b%3Ac"}},
		{{"a", ""}, {"a"}},
		{{"", "a"}, {"a"}},
		{{""}, {"", ""}},
		{{"a b"}, {"a%20b"}},
		{{"A"}, {"a"}},
		{{"{a}"}, {"%7Ba%7D"}},
		{{long}, {long + "x"}},
		{{long, "a"}, {long, "b"}},
		{{long[:250], long[:250]}, {long}},
	}
	for _, p := range pairs {
		a, b := k.Window(k.Group(p[0]), "r"), k.Window(k.Group(p[1]), "r")
		if a == b {
			t.Errorf("%q and %q share key %q", p[0], p[1], a)
		}
	}

	// A value spelling out another tuple's encoding (its readable form or
	// its hashed form) must not land in that tuple's group.
	for _, values := range [][]string{{long}, {long, "a:b"}, {"a:b", "c"}, {"a b", "%"}, {"~x"}, {"한"}} {
		enc := groupPart(t, k, values)
		forged := []string{enc}
		if len(values) == 1 && values[0] == enc {
			continue // a plain value encodes to itself: that is the same tuple
		}
		if k.Cooldown(k.Group(forged), "r") == k.Cooldown(k.Group(values), "r") {
			t.Errorf("the value %.40q forges the group of %.40q", enc, values)
		}
	}
}

// TestKeysInjectiveRandom derives groups for many random tuples built from
// the characters the encoding treats specially and checks that no two
// different tuples share a group.
func TestKeysInjectiveRandom(t *testing.T) {
	k := mustKeys(t, "fw")
	rng := rand.New(rand.NewPCG(20240301, 42))
	alphabet := []string{"a", "b", "A", "3", "F", ":", "%", "%3A", "~", "{", "}", " ", "\n", "-", ".", "_", "@", "+", "한", "😀", "\x00"}
	value := func() string {
		n := rng.IntN(6)
		if rng.IntN(20) == 0 {
			n = 60 + rng.IntN(40) // long enough to be hashed once escaped
		}
		var b strings.Builder
		for range n {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	seen := map[string]string{} // key -> the tuple that made it
	for range 50_000 {
		values := make([]string, 1+rng.IntN(3))
		for i := range values {
			values[i] = value()
		}
		id := fmt.Sprintf("%q", values)
		key := k.Window(k.Group(values), "r")
		if prev, ok := seen[key]; ok && prev != id {
			t.Fatalf("tuples %s and %s share key %q", prev, id, key)
		}
		seen[key] = id
		if tag, end := hashTag(key); end < 0 || len(tag) != 2 || !strings.HasPrefix(key[end:], ":w:r:") || strings.ContainsAny(key[end:], "{}") {
			t.Fatalf("tuple %s broke the hash tag of %q", id, key)
		}
	}
	if len(seen) < 10_000 {
		t.Fatalf("only %d distinct tuples: the generator is too narrow to prove anything", len(seen))
	}
}

func TestValidatePrefix(t *testing.T) {
	tests := []struct {
		prefix string
		ok     bool
	}{
		{"fw", true},
		{"fraudwatch:prod", true},
		{"test:TestX:0a1b", true},
		{"fw-eu.1", true},
		{"", false},
		{"fw{", false},
		{"fw}", false},
		{"{fw}", false},
		{"fw prod", false},
		{"fw\t", false},
		{"fw\n", false},
		{"fw\r", false},
	}
	for _, tt := range tests {
		err := lua.ValidatePrefix(tt.prefix)
		if (err == nil) != tt.ok {
			t.Errorf("ValidatePrefix(%q) = %v, want ok=%v", tt.prefix, err, tt.ok)
		}
		_, nerr := lua.NewKeys(tt.prefix)
		if (nerr == nil) != tt.ok {
			t.Errorf("NewKeys(%q) = %v, want ok=%v", tt.prefix, nerr, tt.ok)
		}
	}
}

// A group read back from its encoding is the group, and nothing that
// encodeGroup cannot make is one.
func TestParseGroup(t *testing.T) {
	k, err := lua.NewKeys("fw")
	if err != nil {
		t.Fatal(err)
	}
	for _, values := range [][]string{{"cust-42"}, {"a:b", "c"}, {"kim@example.com", "+82 10"}, {""}, {strings.Repeat("x", 300)},
		{"{3F}"}, {"ü}"}} {
		g := k.Group(values)
		got, err := k.ParseGroup(g.Encoding())
		if err != nil || got != g {
			t.Errorf("%q: ParseGroup(%q) = %+v, %v; want %+v", values, g.Encoding(), got, err, g)
		}
	}
	for _, enc := range []string{"", "a{b", "a}b", "a b", "%ZZ", "%4", "~abc", "~" + strings.Repeat("g", 64),
		strings.Repeat("a", 201), "a\x00b"} {
		if _, err := k.ParseGroup(enc); err == nil {
			t.Errorf("ParseGroup(%q) accepted it", enc)
		}
	}
}

// NameWindows names windows as Window, Marks and Values do, one by one.
func TestNameWindowsMatchesTheKeys(t *testing.T) {
	k := mustKeys(t, "fw-test")
	long := strings.Repeat("x", 300) // hashed
	names := []lua.WindowName{
		{Group: k.Group([]string{"cust-1"}), Rule: "orders.5c0e19aa"},
		{Group: k.Group([]string{"a:b", "c d"}), Rule: "cards.81f3a0c2", Distinct: true},
		{Group: k.Group([]string{long}), Rule: "r.00000000"},
		{Group: k.Group([]string{""}), Rule: "r.00000000", Distinct: true},
		{Group: k.Group([]string{"한"}), Rule: "amount.1"},
		{Group: k.Group([]string{"cust-1"}), Rule: "orders.5c0e19aa", Fixed: true},
		// Longer than the room a key is written in first.
		{Group: k.Group([]string{strings.Repeat("y", 200)}), Rule: strings.Repeat("r", 100) + ".00000000", Fixed: true},
		{Group: k.Group([]string{strings.Repeat("y", 200)}), Rule: strings.Repeat("r", 100) + ".00000000", Distinct: true},
	}
	ws := make([]lua.Window, len(names))
	k.NameWindows(ws, names)
	for i, n := range names {
		want := lua.Window{Key: k.Window(n.Group, n.Rule), Marks: k.Marks(n.Group, n.Rule)}
		if n.Fixed {
			want.Key = k.Counter(n.Group, n.Rule)
		}
		if n.Distinct {
			want.Values = k.Values(n.Group, n.Rule)
		}
		if ws[i] != want {
			t.Errorf("window %d: NameWindows = %+v, want %+v", i, ws[i], want)
		}
	}
}
