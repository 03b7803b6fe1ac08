package configmap

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// apiServer answers GETs of ConfigMaps from a map, for the token "t0k".
func apiServer(t *testing.T, maps map[string]string) (Client, *[]string) {
	t.Helper()
	var paths []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		if r.Header.Get("Authorization") != "Bearer t0k" {
			http.Error(w, `{"kind":"Status","code":401}`, http.StatusUnauthorized)
			return
		}
		body, ok := maps[r.URL.Path]
		if !ok {
			http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	tok := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tok, []byte("t0k\n"), 0o600))
	return Client{Server: srv.URL, TokenFile: tok, CAFile: ca}, &paths
}

func TestGet(t *testing.T) {
	c, paths := apiServer(t, map[string]string{
		"/api/v1/namespaces/gpu-operator/configmaps/exporter-metrics": `{"kind":"ConfigMap","data":{"metrics":"DCGM_FI_DEV_GPU_TEMP, gauge, t\n"}}`,
		"/api/v1/namespaces/gpu-operator/configmaps/no-metrics":       `{"kind":"ConfigMap","data":{"other":"x"}}`,
	})
	tests := []struct {
		ref     Ref
		want    string
		wantErr string
	}{
		{Ref{"gpu-operator", "exporter-metrics", "metrics"}, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n", ""},
		{Ref{"gpu-operator", "no-metrics", "metrics"}, "", `ConfigMap gpu-operator/no-metrics: no "metrics" key`},
		{Ref{"gpu-operator", "missing", "metrics"}, "", "ConfigMap gpu-operator/missing: not found"},
	}
	for _, tt := range tests {
		t.Run(tt.ref.String(), func(t *testing.T) {
			got, err := c.Get(context.Background(), tt.ref)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	assert.Equal(t, "/api/v1/namespaces/gpu-operator/configmaps/exporter-metrics", (*paths)[0])
}

func TestGetErrors(t *testing.T) {
	c, _ := apiServer(t, nil)
	bad := c
	require.NoError(t, os.WriteFile(bad.TokenFile, []byte("wrong"), 0o600))
	_, err := bad.Get(context.Background(), Ref{"ns", "cm", "metrics"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs get on configmaps in ns")

	noCA := c
	noCA.CAFile = filepath.Join(t.TempDir(), "missing.crt")
	_, err = noCA.Get(context.Background(), Ref{"ns", "cm", "metrics"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading the API server CA")

	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err = Client{}.Get(context.Background(), Ref{"ns", "cm", "metrics"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "KUBERNETES_SERVICE_HOST")
}
