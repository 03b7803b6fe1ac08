package podlabels

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// errGone is a 410 from the API server: the resourceVersion is too old to
// watch from, and only a new LIST helps.
var errGone = errors.New("resource version expired (410 Gone)")

// podObject holds the only parts of a pod (or, in an ERROR event, of a
// Status) that are read; encoding/json skips the rest of the object.
type podObject struct {
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
	} `json:"metadata"`
	// Status fields, set in ERROR events.
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type podList struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Items []podObject `json:"items"`
}

type watchEvent struct {
	Type   string    `json:"type"`
	Object podObject `json:"object"`
}

// httpClient returns a client trusting the CA file's current content. The
// file is re-read so that a rotated CA bundle is picked up at the next
// LIST; the transport (and its connections) is kept while it is unchanged.
func (w *Watcher) httpClient() (*http.Client, error) {
	pem, err := os.ReadFile(w.cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("reading the API server CA: %w", err)
	}
	w.httpMu.Lock()
	defer w.httpMu.Unlock()
	if w.client != nil && bytes.Equal(pem, w.caPEM) {
		return w.client, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("API server CA %s: no PEM certificate in the file", w.cfg.CAFile)
	}
	if w.client != nil {
		w.client.CloseIdleConnections()
	}
	w.client = &http.Client{Transport: &http.Transport{
		TLSClientConfig:       &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   2,
	}}
	w.caPEM = pem
	return w.client, nil
}

// token reads the service-account token; the kubelet rotates the file, so
// it is read for every request.
func (w *Watcher) token() (string, error) {
	b, err := os.ReadFile(w.cfg.TokenFile)
	if err != nil {
		return "", fmt.Errorf("reading the service-account token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("service-account token %s is empty", w.cfg.TokenFile)
	}
	return tok, nil
}

func (w *Watcher) podsURL(q url.Values) string {
	q.Set("fieldSelector", "spec.nodeName="+w.cfg.NodeName)
	return strings.TrimSuffix(w.cfg.Server, "/") + "/api/v1/pods?" + q.Encode()
}

// get sends an authenticated GET and checks the status.
func (w *Watcher) get(ctx context.Context, u string) (*http.Response, error) {
	client, err := w.httpClient()
	if err != nil {
		return nil, err
	}
	tok, err := w.token()
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
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var st podObject
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		msg = st.Message
	}
	if resp.StatusCode == http.StatusGone {
		return nil, fmt.Errorf("GET %s: %s: %w", u, msg, errGone)
	}
	hint := ""
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		hint = " (the service account needs get, list and watch on pods: see docs/kubernetes.md)"
	}
	return nil, fmt.Errorf("GET %s: %s: %s%s", u, resp.Status, msg, hint)
}

// list replaces the pods with those of a LIST and returns its
// resourceVersion.
func (w *Watcher) list(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	u := w.podsURL(url.Values{})
	resp, err := w.get(ctx, u)
	if err != nil {
		return "", fmt.Errorf("listing pods: %w", err)
	}
	defer resp.Body.Close()
	var l podList
	if err := json.NewDecoder(&boundedReader{r: resp.Body, left: maxListBytes}).Decode(&l); err != nil {
		return "", fmt.Errorf("listing pods: decoding the answer of GET %s: %w", u, err)
	}
	if l.Metadata.ResourceVersion == "" {
		return "", fmt.Errorf("listing pods: GET %s: the answer has no resourceVersion", u)
	}
	w.replace(l.Items)
	w.lastList.Store(time.Now().Unix())
	return l.Metadata.ResourceVersion, nil
}

// watch streams events from rv until the server ends the watch (it returns
// the last resourceVersion seen and no error) or an error. established is
// called once the server accepted the watch.
func (w *Watcher) watch(ctx context.Context, rv string, established func()) (string, error) {
	timeout := w.cfg.WatchTimeout + rand.N(w.cfg.WatchTimeout)
	// A server that vanishes without closing the connection would leave the
	// stream open forever: the deadline bounds how long that goes unseen.
	ctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	q := url.Values{}
	q.Set("watch", "1")
	q.Set("allowWatchBookmarks", "true")
	q.Set("resourceVersion", rv)
	q.Set("timeoutSeconds", strconv.Itoa(int(timeout/time.Second)))
	u := w.podsURL(q)
	resp, err := w.get(ctx, u)
	if err != nil {
		return rv, fmt.Errorf("watching pods: %w", err)
	}
	defer resp.Body.Close()
	established()
	started := time.Now()
	br := &boundedReader{r: resp.Body}
	dec := json.NewDecoder(br)
	for {
		br.left = maxEventBytes
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				// A server (or proxy) that ends every watch at once would
				// otherwise be asked again in a tight loop.
				if time.Since(started) < 100*time.Millisecond {
					return rv, fmt.Errorf("watching pods: GET %s: the server ended the watch at once", u)
				}
				return rv, nil
			}
			return rv, fmt.Errorf("watching pods: reading the stream of GET %s: %w", u, err)
		}
		switch ev.Type {
		case "ADDED", "MODIFIED":
			w.apply(false, ev.Object)
		case "DELETED":
			w.apply(true, ev.Object)
		case "BOOKMARK":
		case "ERROR":
			if ev.Object.Code == http.StatusGone {
				return rv, fmt.Errorf("watching pods: %s: %w", ev.Object.Message, errGone)
			}
			return rv, fmt.Errorf("watching pods: the server sent an error: %d %s: %s", ev.Object.Code, ev.Object.Reason, ev.Object.Message)
		default:
			return rv, fmt.Errorf("watching pods: unknown event type %q in the stream of GET %s", ev.Type, u)
		}
		if v := ev.Object.Metadata.ResourceVersion; v != "" {
			rv = v
		}
	}
}

// boundedReader fails once more than left bytes are read, so that a broken
// or hostile answer cannot grow memory without bound.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errors.New("answer exceeds the size bound")
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
