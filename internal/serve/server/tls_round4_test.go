package server

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeCert writes a self-signed RSA certificate for 127.0.0.1 as
// cert.pem and key.pem in dir.
func writeCert(t *testing.T, dir string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpuscope"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
}

// TestTLSRound4DefaultSuites (round 4, item 18): a client offering only
// CBC suites with SHA-1 was accepted (Go's defaults through
// exporter-toolkit). Without cipher_suites in the web config only
// forward-secret AEAD suites are served; a web config that names suites
// still widens the list. The certificate paths are relative to the web
// config's directory, as the toolkit reads them.
func TestTLSRound4DefaultSuites(t *testing.T) {
	cbcOnly := []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, tls.TLS_RSA_WITH_AES_256_CBC_SHA}
	tests := []struct {
		name, extra string
		cbcOK       bool
	}{
		{"no cipher_suites: modern defaults", "", false},
		{"cipher_suites widen the list", "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeCert(t, dir)
			cfg := filepath.Join(dir, "web.yml")
			require.NoError(t, os.WriteFile(cfg, []byte("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"+tt.extra), 0o600))
			reg := prometheus.NewRegistry()
			s, err := New(Options{Engine: &fakeEngine{ready: true}, Gatherer: reg, Registerer: reg, WebConfigFile: cfg, Log: quiet()})
			require.NoError(t, err)
			addr := serve(t, s)
			dial := func(c *tls.Config) error {
				c.InsecureSkipVerify = true
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, c)
				if err == nil {
					conn.Close()
				}
				return err
			}
			require.Eventually(t, func() bool { return dial(&tls.Config{}) == nil }, 10*time.Second, 20*time.Millisecond, "a modern client connects")
			err = dial(&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: cbcOnly})
			if tt.cbcOK {
				assert.NoError(t, err, "the web config's own list is served")
			} else {
				assert.Error(t, err, "a client offering only CBC suites with SHA-1 is refused")
			}
			assert.NoError(t, dial(&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}))
		})
	}
}
