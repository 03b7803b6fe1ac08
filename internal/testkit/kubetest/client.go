package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Object is a Kubernetes object as JSON decodes it.
type Object = map[string]any

// Client sends requests to the API server as one user (a bearer token).
type Client struct {
	Server string
	Token  string
	http   *http.Client
}

// StatusError is an answer other than 2xx, with the Status object's
// reason and message.
type StatusError struct {
	Method, Path string
	Code         int
	Reason       string
	Message      string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, e.Message)
}

// IsStatus reports whether err is a StatusError with the code.
func IsStatus(err error, code int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == code
}

func newClient(server, caFile, token string) (*Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", caFile)
	}
	return &Client{Server: server, Token: token, http: &http.Client{
		Timeout:   time.Minute,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true},
	}}, nil
}

// Do sends method to path (an absolute API path with its query) with body
// as JSON (unless nil) and decodes a 2xx answer into out (unless nil). The
// Warning headers of the answer are returned: the server's field validation
// reports unknown fields there when it is asked to warn.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) (warnings []string, err error) {
	var rd io.Reader
	contentType := "application/json"
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(j)
	}
	if method == http.MethodPatch {
		contentType = "application/merge-patch+json"
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Server, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if rd != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	warnings = resp.Header.Values("Warning")
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return warnings, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		se := &StatusError{Method: method, Path: path, Code: resp.StatusCode, Message: strings.TrimSpace(string(b))}
		var st struct{ Reason, Message string }
		if json.Unmarshal(b, &st) == nil && st.Message != "" {
			se.Reason, se.Message = st.Reason, st.Message
		}
		return warnings, se
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return warnings, fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
		}
	}
	return warnings, nil
}

// Get decodes the object at path into out.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	_, err := c.Do(ctx, http.MethodGet, path, nil, out)
	return err
}

// Create posts obj to the collection at path.
func (c *Client) Create(ctx context.Context, path string, obj any) (Object, error) {
	var out Object
	_, err := c.Do(ctx, http.MethodPost, path, obj, &out)
	return out, err
}

// Patch sends a JSON merge patch to the object at path.
func (c *Client) Patch(ctx context.Context, path string, patch any) (Object, error) {
	var out Object
	_, err := c.Do(ctx, http.MethodPatch, path, patch, &out)
	return out, err
}

// Delete deletes the object at path; grace is the grace period in seconds,
// or negative for the object's default.
func (c *Client) Delete(ctx context.Context, path string, grace int) error {
	var body any
	if grace >= 0 {
		body = Object{"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": grace}
	}
	_, err := c.Do(ctx, http.MethodDelete, path, body, nil)
	return err
}

// Access is one question to the authorizer: may the user do Verb on
// Resource (of Group, in Namespace, or cluster-wide when empty)? A
// subresource follows its resource after a slash (pods/log).
type Access struct {
	Verb, Group, Resource, Namespace, Name string
}

func (a Access) String() string {
	r := a.Resource
	if a.Group != "" {
		r += "." + a.Group
	}
	if a.Name != "" {
		r += "/" + a.Name
	}
	where := "cluster-wide"
	if a.Namespace != "" {
		where = "in " + a.Namespace
	}
	return a.Verb + " " + r + " " + where
}

// CanI asks the server whether this client's user may do a, with a
// SelfSubjectAccessReview.
func (c *Client) CanI(ctx context.Context, a Access) (bool, error) {
	resource, sub, _ := strings.Cut(a.Resource, "/")
	review := Object{
		"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
		"spec": Object{"resourceAttributes": Object{
			"verb": a.Verb, "group": a.Group, "resource": resource, "subresource": sub, "namespace": a.Namespace, "name": a.Name,
		}},
	}
	var out struct {
		Status struct {
			Allowed bool `json:"allowed"`
		} `json:"status"`
	}
	if _, err := c.Do(ctx, http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review, &out); err != nil {
		return false, err
	}
	return out.Status.Allowed, nil
}

// PodPath is the API path of a pod, or of the namespace's pods when name is
// empty.
func PodPath(namespace, name string) string {
	p := "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods"
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}
