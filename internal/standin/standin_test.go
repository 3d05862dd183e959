package standin_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that keeps what a stand-in fails the test
// with, for a test to check that a protocol violation is caught.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// failed is what the stand-in failed the test with since the last call.
func (r *recorder) failed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.errs
	r.errs = nil
	return out
}

// expectFailure checks that the stand-in failed the test once, saying want.
func (r *recorder) expectFailure(t *testing.T, want string) {
	t.Helper()
	got := r.failed()
	if len(got) != 1 || !strings.Contains(got[0], want) {
		t.Errorf("the stand-in failed the test with %q, want once with %q", got, want)
	}
}

// expectNoFailure checks that the stand-in found nothing wrong.
func (r *recorder) expectNoFailure(t *testing.T) {
	t.Helper()
	if got := r.failed(); len(got) > 0 {
		t.Errorf("the stand-in failed the test: %q", got)
	}
}

// do sends req and answers its status and body.
func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// postForm posts form to u with the header h, and decodes Slack's answer.
func postForm(t *testing.T, u string, form url.Values, h map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	code, body := do(t, req)
	var out map[string]any
	_ = json.Unmarshal([]byte(body), &out)
	return code, out
}
