package lua

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A kind is whole when every place a counting script needs has it
// (CONTRIBUTING.md, "Adding a rule kind"): a name, its text and SHA
// registered, Redis loading it, its encoder sending the keys the table
// says and its reply read, and the design's page describing it. Its model
// is held in lua/model (TestEveryKindIsFollowed), its rule in rules
// (TestEveryKindIsReachable).
func TestKindsAreWhole(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	design, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, k := range Kinds() {
		d := &kinds[k]
		t.Run(k.String(), func(t *testing.T) {
			if d.name == "" || seen[d.name] || k.String() != d.name {
				t.Fatalf("kind %d has no name of its own: %q", k, d.name)
			}
			seen[d.name] = true
			if _, ok := Text(d.name); !ok {
				t.Errorf("Text(%q) has no text: add it to Text", d.name)
			}
			if sha, ok := SHA(d.name); !ok || d.script == nil || sha != *d.sha || d.script.Hash() != *d.sha {
				t.Errorf("SHA(%q) = %q, %v; the table's %q: list the script in all, its SHA beside it", d.name, sha, ok, *d.sha)
			}
			if ok, err := loaded(ctx, s, rdb, *d.sha); !ok {
				t.Errorf("Load did not load %s: %v", d.name, err)
			}
			if !strings.Contains(string(design), "**`"+d.name+"`**") {
				t.Errorf("docs/design.md does not describe **`%s`**", d.name)
			}
			if d.reply[0] != noFlag || d.add == nil || d.keys != 1+one(d.marks)+one(d.values) {
				t.Errorf("the table's entry of %s is not whole: %+v", d.name, d)
			}
			// One change to one window with every key a kind may use.
			w := distinctWindow(prefix, "whole-"+d.name, true, time.Minute, 0, 5)
			c := &Call{Kind: k, Source: "0:w", Offsets: offsetsOf(w), Windows: []Window{w},
				Changes: []Change{{Offset: 1, ID: IDOf("e1"), Amount: 1, At: epoch, Value: ValueOf("v1")}}}
			b := s.Batch()
			if err := b.Add(c); err != nil {
				t.Fatalf("Add: %v", err)
			}
			args := b.calls[0].args
			if args[1] != d.sha || args[2] != 1+d.keys {
				t.Errorf("the encoder sends %v and %v keys, the table says %s and %d", args[1], args[2], *d.sha, 1+d.keys)
			}
			if err := b.Exec(ctx); err != nil || len(c.Results) != 1 || c.Results[0].Err != nil {
				t.Fatalf("Exec: %v, results %+v", err, c.Results)
			}
		})
	}
	if err := s.Batch().Add(&Call{Kind: Kind(len(kinds))}); err == nil {
		t.Error("Add took a kind the table has not")
	}
}

func one(b bool) int {
	if b {
		return 1
	}
	return 0
}

// loaded reports whether Load puts the script of sha on every node. On a
// cluster go-redis loads and asks every node it knows, and its view of the
// nodes may grow between the two (a replica it learns of late, which never
// had the script: CI saw Valkey's cluster answer false so), so Load runs
// again, for at most 5 s, until every node it knows has it. A script Load
// leaves out is never there.
func loaded(ctx context.Context, s *Scripts, rdb redis.UniversalClient, sha string) (bool, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, err := rdb.ScriptExists(ctx, sha).Result()
		if err == nil && len(ok) == 1 && ok[0] {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("SCRIPT EXISTS: %v, %v", ok, err)
		}
		if err := s.Load(ctx); err != nil {
			return false, err
		}
	}
}
