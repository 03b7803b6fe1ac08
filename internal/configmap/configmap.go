// Package configmap reads one key of a Kubernetes ConfigMap through the API
// server, with the pod's service-account token: dcgm-exporter's
// -m/--configmap-data reads its counters this way
// (internal/pkg/counters/counter_config.go, readConfigMap).
package configmap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// In-cluster defaults, as every pod sees them.
const (
	DefaultTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	DefaultCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	// maxBody bounds what is read: a ConfigMap holds at most 1 MiB.
	maxBody = 2 << 20
)

// Ref names one key of one ConfigMap.
type Ref struct {
	Namespace, Name, Key string
}

func (r Ref) String() string { return r.Namespace + "/" + r.Name }

// Client reaches the API server.
type Client struct {
	// Server is the API server's base URL; empty: https:// with
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
	Server    string
	TokenFile string
	CAFile    string
	Timeout   time.Duration
}

func (c Client) withDefaults() (Client, error) {
	if c.TokenFile == "" {
		c.TokenFile = DefaultTokenFile
	}
	if c.CAFile == "" {
		c.CAFile = DefaultCAFile
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Server == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			return c, errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: a ConfigMap is read from inside a Kubernetes pod")
		}
		c.Server = "https://" + net.JoinHostPort(host, port)
	}
	return c, nil
}

// Get returns the value of ref's key. Errors name the ConfigMap and say
// what failed (no access, not found, no such key).
func (c Client) Get(ctx context.Context, ref Ref) (string, error) {
	c, err := c.withDefaults()
	if err != nil {
		return "", fmt.Errorf("ConfigMap %s: %w", ref, err)
	}
	value, err := c.get(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("ConfigMap %s: %w", ref, err)
	}
	return value, nil
}

func (c Client) get(ctx context.Context, ref Ref) (string, error) {
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return "", fmt.Errorf("reading the API server CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return "", fmt.Errorf("API server CA %s: no PEM certificate in the file", c.CAFile)
	}
	token, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("reading the service-account token: %w", err)
	}
	u := strings.TrimRight(c.Server, "/") + "/api/v1/namespaces/" + url.PathEscape(ref.Namespace) + "/configmaps/" + url.PathEscape(ref.Name)
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Accept", "application/json")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", fmt.Errorf("reading the answer: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return "", errors.New("not found")
	case http.StatusUnauthorized, http.StatusForbidden:
		return "", fmt.Errorf("the API server answered %s: the service account needs get on configmaps in %s", resp.Status, ref.Namespace)
	default:
		return "", fmt.Errorf("the API server answered %s", resp.Status)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(body, &cm); err != nil {
		return "", fmt.Errorf("decoding the ConfigMap: %w", err)
	}
	v, ok := cm.Data[ref.Key]
	if !ok {
		return "", fmt.Errorf("no %q key", ref.Key)
	}
	return v, nil
}
