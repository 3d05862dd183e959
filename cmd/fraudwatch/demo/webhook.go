package demo

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// caseSystem is the demo's webhook endpoint, a case system's stand-in on
// loopback: it verifies each request's Standard Webhooks signature as a
// real receiver would, prints what it received, and hands the first new
// alert to be acknowledged.
type caseSystem struct {
	name   string // the receiver's name
	secret string // whsec_…, as alert/webhook takes it
	key    []byte
	out    *output
	srv    *http.Server
	url    string
	// created receives the id of the first alert.created, once.
	created chan string

	mu     sync.Mutex
	seen   map[string]bool // webhook-ids taken: a retry is not a new message
	counts map[string]int  // by message type, and "rejected"
}

// maxSkew is how far a webhook-timestamp may be from now, as the
// specification's verifiers allow.
const maxSkew = 5 * time.Minute

func startCaseSystem(name string, out *output) (*caseSystem, error) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: start the webhook endpoint: %w", err)
	}
	c := &caseSystem{name: name, secret: "whsec_" + base64.StdEncoding.EncodeToString(key), key: key, out: out,
		url: "http://" + l.Addr().String() + "/fraudwatch", created: make(chan string, 1),
		seen: map[string]bool{}, counts: map[string]int{}}
	c.srv = &http.Server{Handler: c, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = c.srv.Serve(l) }()
	return c, nil
}

func (c *caseSystem) close() { _ = c.srv.Close() }

// ServeHTTP takes one message: 401 for a bad signature, 400 for a body it
// cannot read, 204 otherwise.
func (c *caseSystem) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	id := r.Header.Get("webhook-id")
	if err != nil || !c.verify(id, r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body) {
		c.count("rejected", "")
		c.out.print(c.out.style(ansiDim, fmt.Sprintf("  → webhook %s: a request without a valid signature, refused (401)", c.name)) + "\n")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var m struct {
		Type  string `json:"type"`
		Alert struct {
			ID   string `json:"id"`
			Rule string `json:"rule"`
		} `json:"alert"`
		State struct {
			AckedBy string `json:"acknowledged_by"`
		} `json:"state"`
	}
	if json.Unmarshal(body, &m) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if c.count(m.Type, id) {
		line := fmt.Sprintf("  → webhook %s: %s %s %s", c.name, clean(m.Type), clean(m.Alert.Rule), clean(m.Alert.ID))
		if m.State.AckedBy != "" {
			line += " by " + clean(m.State.AckedBy)
		}
		c.out.print(c.out.style(ansiDim, line) + "\n")
		if m.Type == "alert.created" {
			select {
			case c.created <- m.Alert.ID:
			default:
			}
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// count counts a message of type typ once per webhook-id; false for a
// retry of one taken.
func (c *caseSystem) count(typ, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id != "" && c.seen[id] {
		return false
	}
	if id != "" {
		c.seen[id] = true
	}
	c.counts[typ]++
	return true
}

// verify checks the signature as the Standard Webhooks specification
// says: HMAC-SHA256 of "<id>.<timestamp>.<body>" with the secret's bytes,
// any of the space-separated "v1,<base64>" signatures, a timestamp near
// now.
func (c *caseSystem) verify(id, ts, sigs string, body []byte) bool {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil || time.Since(time.Unix(sec, 0)).Abs() > maxSkew {
		return false
	}
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte(id + "." + ts + "."))
	h.Write(body)
	want := h.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, ok := strings.CutPrefix(s, "v1,")
		got, err := base64.StdEncoding.DecodeString(v)
		if ok && err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// received is how many messages of type typ it took.
func (c *caseSystem) received(typ string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[typ]
}
