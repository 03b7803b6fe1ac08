package kubeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/apiservertest"
)

const podsPath = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"

type podList struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"items"`
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestGetJSON(t *testing.T) {
	api := apiservertest.Start(t)
	api.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-1"})
	api.Set(apiservertest.Pod{Namespace: "ml", Name: "other", Node: "node-2"})
	tests := []struct {
		name       string
		path       string
		tokenFile  string // empty: the server's
		caFile     string // empty: the server's
		maxBytes   int64
		wantPods   []string
		wantStatus int    // the StatusError's code, when one is expected
		wantMsg    string // the StatusError's message
		wantErr    string // a substring of any other error
	}{
		{name: "list", path: podsPath, maxBytes: 1 << 20, wantPods: []string{"train-0"}},
		{name: "wrong token", path: podsPath, tokenFile: writeFile(t, "stolen\n"), maxBytes: 1 << 20,
			wantStatus: http.StatusUnauthorized, wantMsg: "Unauthorized"},
		{name: "not served", path: "/api/v1/nodes", maxBytes: 1 << 20,
			wantStatus: http.StatusNotFound, wantMsg: "the server could not find the requested resource"},
		{name: "empty token", path: podsPath, tokenFile: writeFile(t, "\n"), maxBytes: 1 << 20, wantErr: "is empty"},
		{name: "no token file", path: podsPath, tokenFile: filepath.Join(t.TempDir(), "none"), maxBytes: 1 << 20,
			wantErr: "reading the service-account token"},
		{name: "no CA file", path: podsPath, caFile: filepath.Join(t.TempDir(), "none"), maxBytes: 1 << 20,
			wantErr: "reading the API server CA"},
		{name: "CA not PEM", path: podsPath, caFile: writeFile(t, "not a certificate"), maxBytes: 1 << 20,
			wantErr: "no PEM certificate in the file"},
		{name: "answer over the bound", path: podsPath, maxBytes: 16, wantErr: ErrTooLarge.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Client{Server: api.URL() + "/", TokenFile: api.TokenFile, CAFile: api.CAFile}
			if tt.tokenFile != "" {
				c.TokenFile = tt.tokenFile
			}
			if tt.caFile != "" {
				c.CAFile = tt.caFile
			}
			var l podList
			err := c.GetJSON(context.Background(), tt.path, tt.maxBytes, &l)
			var se *StatusError
			switch {
			case tt.wantStatus != 0:
				require.True(t, errors.As(err, &se), "want a StatusError, got %v", err)
				assert.Equal(t, tt.wantStatus, se.Code)
				assert.Equal(t, tt.wantMsg, se.Message)
				assert.Equal(t, tt.wantStatus == http.StatusUnauthorized, se.Forbidden())
				assert.Contains(t, err.Error(), api.URL()+tt.path, "the error names the URL")
			case tt.wantErr != "":
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
			default:
				require.NoError(t, err)
				var names []string
				for _, p := range l.Items {
					names = append(names, p.Metadata.Name)
				}
				assert.Equal(t, tt.wantPods, names)
				assert.NotEmpty(t, l.Metadata.ResourceVersion)
			}
		})
	}
}

// otherCA is a PEM certificate that did not sign the fake server's.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// The kubelet rotates the token and the CA bundle while the pod runs: each
// request uses the files' current content.
func TestRotation(t *testing.T) {
	api := apiservertest.Start(t)
	serverCA, err := os.ReadFile(api.CAFile)
	require.NoError(t, err)
	caFile := writeFile(t, string(otherCA(t)))
	c, err := New(api.URL(), api.TokenFile, caFile)
	require.NoError(t, err)
	steps := []struct {
		name      string
		rotate    func(t *testing.T)
		wantErr   string
		wantToken string
	}{
		{"a CA that did not sign the server", func(*testing.T) {}, "certificate", ""},
		{"CA rotated to the server's", func(t *testing.T) {
			require.NoError(t, os.WriteFile(caFile, serverCA, 0o600))
		}, "", "token-1"},
		{"token rotated", func(*testing.T) { api.SetToken("token-2") }, "", "token-2"},
	}
	for _, st := range steps {
		st.rotate(t)
		var l podList
		err := c.GetJSON(context.Background(), podsPath, 1<<20, &l)
		if st.wantErr != "" {
			require.Error(t, err, st.name)
			assert.Contains(t, err.Error(), st.wantErr, st.name)
			continue
		}
		require.NoError(t, err, st.name)
		reqs := api.Requests()
		assert.Equal(t, st.wantToken, reqs[len(reqs)-1].Token, st.name)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name, host, port, server string
		want                     string
		wantErr                  string
	}{
		{name: "in cluster", host: "fd00::1", port: "443", want: "https://[fd00::1]:443"},
		{name: "given server", server: "https://api.example:6443", want: "https://api.example:6443"},
		{name: "outside a pod", port: "443", wantErr: "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", tt.host)
			t.Setenv("KUBERNETES_SERVICE_PORT", tt.port)
			c, err := New(tt.server, "", "")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.Server)
			assert.Equal(t, DefaultTokenFile, c.TokenFile)
			assert.Equal(t, DefaultCAFile, c.CAFile)
		})
	}
}
