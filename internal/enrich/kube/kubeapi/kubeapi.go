// Package kubeapi reaches the Kubernetes API server from inside a pod: the
// address from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, the
// service-account token and the cluster CA from their mounted files. The
// token is read for every request and the CA whenever a request is made,
// because the kubelet rotates both files while the pod runs.
package kubeapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// In-cluster defaults, as every pod sees them.
const (
	DefaultTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	DefaultCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	// maxStatusBytes bounds what is read of an answer other than 200.
	maxStatusBytes = 4096
)

// InClusterServer is the API server address a pod sees. The error says the
// variables are missing; callers add what needed them.
func InClusterServer() (string, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return "", errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
	}
	return "https://" + net.JoinHostPort(host, port), nil
}

// StatusError is an answer other than 200. Message is the Status object's
// message when the body holds one, else the body itself (bounded).
type StatusError struct {
	URL     string
	Code    int
	Status  string // "401 Unauthorized"
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: %s: %s", e.URL, e.Status, e.Message)
}

// Forbidden says the answer was 401 or 403: the service account lacks a
// permission, which callers name.
func (e *StatusError) Forbidden() bool {
	return e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden
}

// Client sends authenticated GETs. Its fields are set before first use;
// its methods are safe for concurrent use.
type Client struct {
	// Server is the API server's base URL.
	Server string
	// TokenFile holds the service-account token; empty: DefaultTokenFile.
	TokenFile string
	// CAFile holds the API server's CA bundle; empty: DefaultCAFile.
	CAFile string
	// MaxIdleConns bounds the idle connections kept; 0: 2.
	MaxIdleConns int

	mu     sync.Mutex // guards client, caPEM
	client *http.Client
	caPEM  []byte
}

// New returns a client of server, or of the in-cluster address when server
// is empty; empty file names take the defaults.
func New(server, tokenFile, caFile string) (*Client, error) {
	if server == "" {
		s, err := InClusterServer()
		if err != nil {
			return nil, err
		}
		server = s
	}
	if tokenFile == "" {
		tokenFile = DefaultTokenFile
	}
	if caFile == "" {
		caFile = DefaultCAFile
	}
	return &Client{Server: server, TokenFile: tokenFile, CAFile: caFile}, nil
}

// URL joins the server's base URL and an absolute API path (with query).
func (c *Client) URL(path string) string {
	return strings.TrimRight(c.Server, "/") + path
}

// httpClient returns a client trusting the CA file's current content. The
// transport (and its connections) is kept while the file is unchanged and
// rebuilt when it is rotated.
func (c *Client) httpClient() (*http.Client, error) {
	caFile := c.CAFile
	if caFile == "" {
		caFile = DefaultCAFile
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the API server CA: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil && bytes.Equal(pem, c.caPEM) {
		return c.client, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("API server CA %s: no PEM certificate in the file", caFile)
	}
	if c.client != nil {
		c.client.CloseIdleConnections()
	}
	idle := c.MaxIdleConns
	if idle <= 0 {
		idle = 2
	}
	c.client = &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:       &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   idle,
		},
		// The API server never redirects the requests gpuscope sends; one
		// that does would have the bearer token follow it to whatever it
		// names, plain HTTP included. Get refuses the answer instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	c.caPEM = pem
	return c.client, nil
}

// token reads the service-account token; the kubelet rotates the file.
func (c *Client) token() (string, error) {
	tokenFile := c.TokenFile
	if tokenFile == "" {
		tokenFile = DefaultTokenFile
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", fmt.Errorf("reading the service-account token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("service-account token %s is empty", tokenFile)
	}
	return tok, nil
}

// CloseIdleConnections closes the connections kept for later requests, for
// a client used once.
func (c *Client) CloseIdleConnections() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		c.client.CloseIdleConnections()
	}
}

// Get sends an authenticated GET of path (an absolute API path with its
// query) and returns the response of a 200, whose body the caller closes;
// any other answer is a *StatusError.
func (c *Client) Get(ctx context.Context, path string) (*http.Response, error) {
	u := c.URL(path)
	client, err := c.httpClient()
	if err != nil {
		return nil, err
	}
	tok, err := c.token()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "gpuscope")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil, &StatusError{URL: u, Code: resp.StatusCode, Status: resp.Status,
			Message: fmt.Sprintf("a redirect to %q, refused: the token goes to the configured API server only", clip(resp.Header.Get("Location")))}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes))
	msg := strings.TrimSpace(string(body))
	var st struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		msg = st.Message
	}
	return nil, &StatusError{URL: u, Code: resp.StatusCode, Status: resp.Status, Message: msg}
}

// clip bounds a string of the server's that an error quotes.
func clip(s string) string {
	const quoted = 256
	if len(s) <= quoted {
		return s
	}
	return s[:quoted] + "..."
}

// GetJSON sends Get and decodes the answer into v, reading at most
// maxBytes of it.
func (c *Client) GetJSON(ctx context.Context, path string, maxBytes int64, v any) error {
	resp, err := c.Get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(NewBoundedReader(resp.Body, maxBytes)).Decode(v); err != nil {
		return fmt.Errorf("decoding the answer of GET %s: %w", resp.Request.URL, err)
	}
	return nil
}

// ErrTooLarge is returned by a BoundedReader past its bound.
var ErrTooLarge = errors.New("answer exceeds the size bound")

// BoundedReader fails once more than Left bytes are read, so that a broken
// or hostile answer cannot grow memory without bound. A reader of a stream
// of objects resets Left before each one.
type BoundedReader struct {
	R    io.Reader
	Left int64
}

// NewBoundedReader bounds r to n bytes.
func NewBoundedReader(r io.Reader, n int64) *BoundedReader {
	return &BoundedReader{R: r, Left: n}
}

func (b *BoundedReader) Read(p []byte) (int, error) {
	if b.Left <= 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.Left {
		p = p[:b.Left]
	}
	n, err := b.R.Read(p)
	b.Left -= int64(n)
	return n, err
}
