package webhook_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/alert/webhook"
)

// verifyPy verifies a message with the specification's Python library
// (PyPI's standardwebhooks), timestamp tolerance included: argv is the
// message's file, then the secrets; it prints one line a secret.
const verifyPy = `
import json, sys
from standardwebhooks import Webhook
m = json.load(open(sys.argv[1]))
for secret in sys.argv[2:]:
    try:
        Webhook(secret).verify(m["body"], m["headers"])
        print("ok")
    except Exception as e:
        print("refused: " + type(e).__name__)
`

// A second published verifier, in another language, when python3 has it;
// the Go library's tests run always.
func TestPythonsStandardWebhooksVerifies(t *testing.T) {
	if err := exec.Command("python3", "-c", "import standardwebhooks").Run(); err != nil {
		t.Skip("python3 with the standardwebhooks package (pip install standardwebhooks) is not here: " +
			"the Python verifier is not tried; the Go verifier's tests still run")
	}
	oldSecret, newSecretV := newSecret(t), newSecret(t)
	s := newStandIn(t)
	n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{newSecretV, oldSecret}})
	if _, err := n.Notify(context.Background(), sample()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	r := s.last(t)
	tampered := strings.Replace(string(r.body), "amount-per-card-10m", "amount-per-card-1m", 1)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, want string
	}{
		{name: "as sent", body: string(r.body), want: "ok\nok\nrefused: WebhookVerificationError\n"},
		{name: "tampered", body: tampered, want: "refused: WebhookVerificationError\nrefused: WebhookVerificationError\nrefused: WebhookVerificationError\n"},
	} {
		headers := map[string]string{}
		for _, h := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
			headers[h] = r.header.Get(h)
		}
		msg, _ := json.Marshal(map[string]any{"body": tc.body, "headers": headers})
		file := filepath.Join(dir, "msg.json")
		if err := os.WriteFile(file, msg, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("python3", "-c", verifyPy, file, oldSecret, newSecretV, newSecret(t)).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: python3: %v\n%s", tc.name, err, out)
		}
		if string(out) != tc.want {
			t.Errorf("%s: Python's verifier says\n%s\nwant\n%s", tc.name, out, tc.want)
		}
	}
}
