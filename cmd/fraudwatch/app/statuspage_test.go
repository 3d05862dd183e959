package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
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
// sandbox), in a profile of its own, and returns what it printed.
func browse(t *testing.T, browser, url string, args ...string) []byte {
	t.Helper()
	out, _ := browseLogged(t, browser, url, args...)
	return out
}

// browseLogged is browse that returns Chromium's log too, with the pages'
// console messages in it.
func browseLogged(t *testing.T, browser, url string, args ...string) (out []byte, log string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,1200", "--enable-logging=stderr", "--v=0"}, args...)
	cmd := exec.CommandContext(ctx, browser, append(all, url)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, stderr.String())
	}
	return out, stderr.String()
}

// The status page, as a browser renders it from a running fraudwatch: the
// rules in force with their version, the alert just settled, the silence
// that runs, the lag of the partitions held; no group value anywhere.
func TestStatusPageInABrowser(t *testing.T) {
	browser := chromium(t)
	p := newPipeline(t, 2, countRule+whereRule)
	r, path, hup := p.startOnFile(countRule + whereRule)
	waitFor(t, 30*time.Second, "ready", func() bool { return r.ready(t) })
	p.orders(0, ev{id: "1", customer: "cust-secret-1", amount: 1}, ev{id: "2", customer: "cust-secret-1", amount: 1},
		ev{id: "3", customer: "cust-secret-1", amount: 1})
	waitFor(t, 30*time.Second, "the alert settled", func() bool { return len(r.app.recent()) == 1 })
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

	dom := renderRead(t, browser, url, r)
	for _, want := range []string{
		"Rules in force", "version " + rules.Version(p.cfg.Rules), path + " last read at ",
		"<td>orders-per-customer</td><td>alert</td><td>high</td>", "<td>" + whereShown + "</td>",
		"o-3", `class="sent">sent`,
		"one group by customer_id", "known reseller &lt;b&gt;", "kim",
		"<td>" + p.cfg.Kafka.OrdersTopic + "</td>",
		// The alert sent is open, counted under its rule (none acknowledged,
		// one waiting) and listed.
		`<tr><td>orders-per-customer</td><td class="num">1</td>`, `<td class="num">0</td><td class="num"></td>`,
		"<td>orders-per-customer/", `class="open">open`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q:\n%s", want, dom)
		}
	}
	if strings.Contains(dom, "cust-secret") || strings.Contains(dom, "refused") {
		t.Errorf("the page shows a group value or a refusal:\n%s", dom)
	}
	screenshot(t, browser, url, "status-page.png")

	// A refused reading shows above the rules still in force, with its reason.
	writeAtomically(t, path, strings.Replace(countRule, "threshold: 3", "threshold: three", 1)+whereRule)
	hup <- syscall.SIGHUP
	waitFor(t, 10*time.Second, "the refusal", func() bool { return strings.Contains(getPage(t, r), "was refused") })
	dom = string(browse(t, browser, url, "--dump-dom"))
	for _, want := range []string{"was refused (invalid)", "The rules in force stay", `<pre class="error">` + path, "threshold"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q:\n%s", want, dom)
		}
	}
	screenshot(t, browser, url, "status-page-refused.png")
}

// renderRead is the page as the browser renders it once a rendering has
// every section read from Redis. Each section has 2 s of its own, which a
// loaded machine may miss now and then: each miss is logged with the
// replica's warnings that say why.
func renderRead(t *testing.T, browser, url string, r *replica) string {
	t.Helper()
	var dom string
	waitFor(t, 90*time.Second, "a rendering with every section read from Redis", func() bool {
		before := len(r.logs.String())
		dom = string(browse(t, browser, url, "--dump-dom"))
		if !strings.Contains(dom, "could not be read") {
			return true
		}
		var why []string
		for l := range strings.Lines(r.logs.String()[before:]) {
			if strings.Contains(l, "status page:") {
				why = append(why, l)
			}
		}
		t.Logf("a rendering missed a section; the replica logged:\n%s", strings.Join(why, ""))
		return false
	})
	return dom
}

// screenshot keeps a screenshot of url, named name, in the artifacts'
// directory.
func screenshot(t *testing.T, browser, url, name string) {
	t.Helper()
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, name)
	browse(t, browser, url, "--screenshot="+shot, "--hide-scrollbars")
	png, err := os.ReadFile(shot)
	if err != nil || len(png) < 1000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("no screenshot at %s (%d bytes, %v)", shot, len(png), err)
	}
	t.Logf("screenshot of the status page: %s", shot)
}

// startOnFile runs a replica whose rules are read from a file holding
// content, and reloaded on hup. Its log is shown when the test fails: the
// page says only that a section could not be read, the log says why.
func (p *pipeline) startOnFile(content string) (r *replica, path string, hup chan os.Signal) {
	p.t.Helper()
	path = filepath.Join(p.t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		p.t.Fatal(err)
	}
	p.cfg.RulesFile = path
	hup = make(chan os.Signal, 1)
	opts := p.options()
	opts.Reload = hup
	logs := &testkit.Buffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	// Registered before startWith's stop, so run after it: the whole log.
	p.t.Cleanup(func() {
		if p.t.Failed() {
			p.t.Logf("the replica's log:\n%s", logs)
		}
	})
	r = p.startWith(opts)
	r.logs = logs
	return r, path, hup
}

// A page of another site that frames the status page sees it refused:
// the browser reports that frame-ancestors 'none' blocked it.
func TestStatusPageCannotBeFramed(t *testing.T) {
	browser := chromium(t)
	p := newPipeline(t, 1, countRule)
	r := p.start()
	status := "http://" + r.app.Addr() + "/"
	framer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><title>not fraudwatch</title><iframe src="%s" width="800" height="600"></iframe>`, status)
	}))
	defer framer.Close()
	dom, log := browseLogged(t, browser, framer.URL, "--dump-dom")
	if !strings.Contains(string(dom), `<iframe src="`+status+`"`) {
		t.Fatalf("the framing page did not load:\n%s", dom)
	}
	refused := false
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "CONSOLE") && strings.Contains(line, status) && strings.Contains(line, "frame-ancestors 'none'") {
			refused = true
		}
	}
	if !refused {
		t.Errorf("no refusal to frame %s in the browser's log:\n%s", status, log)
	}
}

// whereRule is a rule with a where: filter, and whereShown its conditions
// as check's table (and so the status page) shows them.
const (
	whereRule = `
  - name: big-orders
    metric: count
    group_by: [customer_id]
    window: 1m
    threshold: 100
    where:
      currency: [KRW, USD]
      amount: {gte: 10000}
`
	whereShown = "amount &gt;= 10000; currency in KRW|USD"
)

// getPage is the status page of a running replica.
func getPage(t *testing.T, r *replica) string {
	t.Helper()
	resp, err := http.Get("http://" + r.app.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %d, %v", resp.StatusCode, err)
	}
	return string(body)
}

// The status page says what the last reading of the rules file came to: a
// refused one with its time, file and error, and that the rules in force
// stay the old ones; a later reading that is taken clears it. Each rule
// shows its where: conditions.
func TestStatusPageShowsReloads(t *testing.T) {
	p := newPipeline(t, 1, reloadRules("3")+whereRule)
	r, path, hup := p.startOnFile(reloadRules("3") + whereRule)
	threshold := func(page string, n int) bool {
		return strings.Contains(page, fmt.Sprintf(`<td>fixed 1m</td><td class="num">%d</td>`, n))
	}

	page := getPage(t, r)
	for _, want := range []string{"<td>" + whereShown + "</td>", "<td>-</td>", path + " last read at ", "): taken, "} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}

	writeAtomically(t, path, strings.Replace(reloadRules("4"), "window: 1m", "window: 90", 1)+whereRule)
	hup <- syscall.SIGHUP
	waitFor(t, 10*time.Second, "the refusal on the page", func() bool {
		return strings.Contains(getPage(t, r), "was refused (invalid)")
	})
	page = getPage(t, r)
	for _, want := range []string{
		"The last reading of " + path + ", at ",
		"The rules in force stay the ones below",
		// The reason, as the log has it: the file, the rule and the field.
		`<pre class="error">` + path, "&#34;burst&#34;", "window",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if !threshold(page, 3) || strings.Contains(page, "): taken, ") {
		t.Errorf("the page does not show the old rules in force alone:\n%s", page)
	}

	// The file's change and the signal each make a reading: the first takes
	// the new rules, a second finds them unchanged. Either is "taken".
	writeAtomically(t, path, reloadRules("4")+whereRule)
	hup <- syscall.SIGHUP
	waitFor(t, 10*time.Second, "the new rules on the page, the refusal cleared", func() bool {
		page = getPage(t, r)
		return threshold(page, 4) && strings.Contains(page, "): taken, ") && !strings.Contains(page, "refused")
	})
}
