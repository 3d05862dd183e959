package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clearEnv blanks every override for the test, so that the environment the
// tests run in cannot change their outcome. Empty counts as unset.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, l := range leaves() {
		t.Setenv(l.env, "")
	}
}

// decodeFile decodes a config file without validating it or loading rules.
func decodeFile(t *testing.T, path string) *Config {
	t.Helper()
	c, err := decodePath(path)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return c
}

func decodePath(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	return decode(data, path, abs)
}

// writeConfig writes yaml as config.yaml into a new directory, next to a
// copy of testdata/rules.yaml, and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	copyFile(t, "testdata/rules.yaml", filepath.Join(dir, "rules.yaml"))
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, yaml)
	return path
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(data))
}

// pki is a throw-away CA and a client certificate it signed.
type pki struct {
	CA, Cert, Key string // PEM files
	OtherKey      string // a key that does not match Cert
	NotPEM        string // a readable file holding no PEM
}

// writePKI writes a pki into dir under the names full.yaml uses
// (certs/ca.pem, certs/client.pem, certs/client-key.pem).
func writePKI(t *testing.T, dir string) pki {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keyPEM := func(k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	}
	certPEM := func(der []byte, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	caKey, clientKey := newKey(), newKey()
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "fraudwatch test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	clientTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "fraudwatch"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	p := pki{
		CA:       filepath.Join(dir, "certs", "ca.pem"),
		Cert:     filepath.Join(dir, "certs", "client.pem"),
		Key:      filepath.Join(dir, "certs", "client-key.pem"),
		OtherKey: filepath.Join(dir, "certs", "other-key.pem"),
		NotPEM:   filepath.Join(dir, "certs", "not-pem.txt"),
	}
	writeFile(t, p.CA, certPEM(x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)))
	writeFile(t, p.Cert, certPEM(x509.CreateCertificate(rand.Reader, clientTmpl, caTmpl, &clientKey.PublicKey, caKey)))
	writeFile(t, p.Key, keyPEM(clientKey))
	writeFile(t, p.OtherKey, keyPEM(newKey()))
	writeFile(t, p.NotPEM, "not a certificate\n")
	return p
}

// messages flattens a joined error into its messages.
func messages(err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, messages(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

// wantMessages checks that err holds exactly one message containing each
// of want, and nothing else.
func wantMessages(t *testing.T, err error, want ...string) {
	t.Helper()
	got := messages(err)
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		n := 0
		for _, g := range got {
			if strings.Contains(g, w) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("want one error containing %q, got:\n%s", w, strings.Join(got, "\n"))
		}
	}
}
