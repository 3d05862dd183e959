package app

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/rules"
)

// EnvChromium names the headless browser the status page is tested in
// (scripts/test.sh installs Debian's chromium and sets it), and
// EnvArtifacts the directory its screenshot is kept in.
const (
	EnvChromium  = "FRAUDWATCH_TEST_CHROMIUM"
	EnvArtifacts = "FRAUDWATCH_TEST_ARTIFACTS"
)

// chromium finds the browser: the one scripts/test.sh names, else one on
// PATH. In CI the test fails without one; a developer's quick run skips.
func chromium(t testing.TB) string {
	t.Helper()
	if b := os.Getenv(EnvChromium); b != "" {
		return b
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if b, err := exec.LookPath(name); err == nil {
			return b
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("the status page test needs a headless Chromium: scripts/test.sh installs it and sets " + EnvChromium)
	}
	t.Skip("no Chromium: set " + EnvChromium + " or run scripts/test.sh")
	return ""
}

// browse runs headless Chromium on url with args, as root too (no
// sandbox), in a profile of its own.
func browse(t *testing.T, browser, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,1200"}, args...)
	cmd := exec.CommandContext(ctx, browser, append(all, url)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, stderr.String())
	}
	return out
}

// The status page, as a browser renders it from a running fraudwatch: the
// rules in force with their version, the alert just settled, the silence
// that runs, the lag of the partitions held; no group value anywhere.
func TestStatusPageInABrowser(t *testing.T) {
	browser := chromium(t)
	p := newPipeline(t, 2, countRule)
	r := p.start()
	waitFor(t, 30*time.Second, "ready", func() bool { return r.ready(t) })
	p.orders(0, ev{id: "1", customer: "cust-secret-1", amount: 1}, ev{id: "2", customer: "cust-secret-1", amount: 1},
		ev{id: "3", customer: "cust-secret-1", amount: 1})
	waitFor(t, 30*time.Second, "the alert settled", func() bool { return len(r.app.disp.Recent()) == 1 })
	keys, err := lua.NewKeys(p.cfg.Redis.KeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := silence.NewStore(p.rdb, r.app.lua, keys).Add(t.Context(), SilenceRules(p.cfg.Rules), silence.Spec{
		Rule: "orders-per-customer", Match: map[string]string{"customer_id": "cust-secret-2"}, For: time.Hour,
		Reason: "known reseller <b>", Author: "kim"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	url := "http://" + r.app.Addr() + "/"

	dom := string(browse(t, browser, url, "--dump-dom"))
	for _, want := range []string{
		"Rules in force", "version " + rules.Version(p.cfg.Rules),
		"<td>orders-per-customer</td><td>alert</td><td>high</td>",
		"o-3", `class="sent">sent`,
		"one group by customer_id", "known reseller &lt;b&gt;", "kim",
		"<td>" + p.cfg.Kafka.OrdersTopic + "</td>",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q:\n%s", want, dom)
		}
	}
	if strings.Contains(dom, "cust-secret") {
		t.Error("the page shows a group value")
	}

	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "status-page.png")
	browse(t, browser, url, "--screenshot="+shot, "--hide-scrollbars")
	png, err := os.ReadFile(shot)
	if err != nil || len(png) < 1000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("no screenshot at %s (%d bytes, %v)", shot, len(png), err)
	}
	t.Logf("screenshot of the status page: %s", shot)
}
