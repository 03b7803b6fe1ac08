// Package apiservertest is a fake Kubernetes API server for tests of pod
// label watching: it serves LIST and WATCH of /api/v1/pods over TLS with a
// bearer token, filtered by spec.nodeName, and lets a test change pods,
// send bookmarks, expire watches, rotate the token and stop and restart the
// server on the same address.
package apiservertest

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Pod is one pod as the fake server knows it.
type Pod struct {
	Namespace, Name, Node string
	Labels                map[string]string
}

// SliceDevice is one device of a ResourceSlice, with the attributes the
// NVIDIA DRA driver publishes (type "gpu" or "mig", uuid, parentUUID,
// profile); only string attributes are served.
type SliceDevice struct {
	Name       string
	Attributes map[string]string
}

// ResourceSlice is one resource.k8s.io ResourceSlice.
type ResourceSlice struct {
	Name, Driver, Pool, Node string
	Devices                  []SliceDevice
}

// Request is one request the server received.
type Request struct {
	Path  string
	Query url.Values
	Token string
	Watch bool
}

type event struct {
	typ string
	rv  int
	pod Pod
}

// maxHistory bounds the events kept for watches that resume from an older
// resourceVersion.
const maxHistory = 4096

// Server is the fake API server.
type Server struct {
	// CAFile and TokenFile are the service-account files a client reads.
	CAFile, TokenFile string

	// errorf reports what fails after the start (writing the files).
	errorf func(format string, args ...any)
	addr   string

	mu       sync.Mutex
	srv      *httptest.Server
	pods     map[string]Pod
	rv       int
	history  []event
	expired  int // watches from a resourceVersion below this get 410
	watchers map[chan event]struct{}
	token    string
	requests []Request
	slices   map[string]ResourceSlice
	// sliceVersions are the resource.k8s.io versions served.
	sliceVersions []string
	// bad is how the server fails instead of answering (hostile.go).
	bad hostile
}

// Start starts a server whose token is "token-1" and registers its stop with
// t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New(t.TempDir(), "127.0.0.1:0", t.Errorf)
	if err != nil {
		t.Fatalf("fake API server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// New starts a server on addr whose token is "token-1", with its CA and
// token files in dir, for a command that serves it (fakeapiserver); errorf
// reports what fails later. Stop ends it.
func New(dir, addr string, errorf func(format string, args ...any)) (*Server, error) {
	s := &Server{
		errorf:    errorf,
		CAFile:    filepath.Join(dir, "ca.crt"),
		TokenFile: filepath.Join(dir, "token"),
		pods:      map[string]Pod{},
		rv:        100,
		watchers:  map[chan event]struct{}{},
	}
	s.SetToken("token-1")
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.addr = l.Addr().String()
	s.serve(l)
	return s, nil
}

func (s *Server) serve(l net.Listener) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.handle))
	_ = srv.Listener.Close()
	srv.Listener = l
	srv.StartTLS()
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(s.CAFile, b, 0o600); err != nil {
		s.errorf("fake API server: writing the CA: %v", err)
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

// URL is the server's base URL.
func (s *Server) URL() string { return "https://" + s.addr }

// Stop closes every connection and the listener, as an API server that
// goes away.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	for ch := range s.watchers {
		close(ch)
		delete(s.watchers, ch)
	}
	s.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// Restart serves again on the same address, with the pods as they are now.
func (s *Server) Restart() error {
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("fake API server: listening again on %s: %w", s.addr, err)
	}
	s.serve(l)
	return nil
}

// SetToken sets the accepted token and writes it to TokenFile, as the
// kubelet does when it rotates a projected token.
func (s *Server) SetToken(tok string) {
	s.mu.Lock()
	s.token = tok
	s.mu.Unlock()
	if err := os.WriteFile(s.TokenFile, []byte(tok+"\n"), 0o600); err != nil {
		s.errorf("fake API server: writing the token: %v", err)
	}
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Watchers is the number of open watches.
func (s *Server) Watchers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watchers)
}

// Set adds or modifies a pod.
func (s *Server) Set(p Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := p.Namespace + "/" + p.Name
	typ := "MODIFIED"
	if _, ok := s.pods[k]; !ok {
		typ = "ADDED"
	}
	s.pods[k] = p
	s.emitLocked(typ, p)
}

// Delete deletes a pod.
func (s *Server) Delete(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := namespace + "/" + name
	p, ok := s.pods[k]
	if !ok {
		return
	}
	delete(s.pods, k)
	s.emitLocked("DELETED", p)
}

// SetQuietly changes a pod without a watch event, as a change the client
// missed; only a new LIST shows it.
func (s *Server) SetQuietly(p Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	s.pods[p.Namespace+"/"+p.Name] = p
}

// Bookmark sends a BOOKMARK with the current resourceVersion.
func (s *Server) Bookmark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broadcastLocked(event{typ: "BOOKMARK", rv: s.rv})
}

// Expire ends every watch with an ERROR 410 event and refuses to resume
// from any resourceVersion seen so far, so the client must list again.
func (s *Server) Expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The LIST that follows reports a resourceVersion past every one seen
	// before, and a watch may resume from it, as on the API server.
	s.rv++
	s.expired = s.rv
	s.history = nil
	s.broadcastLocked(event{typ: "ERROR", rv: s.rv})
	// The ERROR ends those watches: they no longer count as open, even
	// before their handlers have sent it, so that Watchers tells a client's
	// new watch from the one that just ended.
	for ch := range s.watchers {
		delete(s.watchers, ch)
	}
}

func (s *Server) emitLocked(typ string, p Pod) {
	s.rv++
	ev := event{typ: typ, rv: s.rv, pod: p}
	s.history = append(s.history, ev)
	if len(s.history) > maxHistory {
		s.history = s.history[len(s.history)-maxHistory:]
	}
	s.broadcastLocked(ev)
}

func (s *Server) broadcastLocked(ev event) {
	for ch := range s.watchers {
		select {
		case ch <- ev:
		default:
			// A watcher too slow to keep up is dropped, as the API server does.
			close(ch)
			delete(s.watchers, ch)
		}
	}
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	watch := q.Get("watch") == "1" || q.Get("watch") == "true"
	s.mu.Lock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Query: q, Token: tok, Watch: watch})
	want := s.token
	s.mu.Unlock()
	if s.answerHostile(w, r, watch) {
		return
	}
	if v, ok := strings.CutPrefix(r.URL.Path, "/apis/resource.k8s.io/"); ok && strings.HasSuffix(v, "/resourceslices") {
		if tok != want {
			writeStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
			return
		}
		s.serveSlices(w, strings.TrimSuffix(v, "/resourceslices"), q)
		return
	}
	switch {
	case r.URL.Path != "/api/v1/pods":
		writeStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		return
	case tok != want:
		writeStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
		return
	}
	node, ok := strings.CutPrefix(q.Get("fieldSelector"), "spec.nodeName=")
	if !ok || node == "" {
		writeStatus(w, http.StatusBadRequest, "BadRequest", "this fake serves only node-scoped requests (fieldSelector=spec.nodeName=...)")
		return
	}
	if watch {
		s.serveWatch(w, r, node, q.Get("resourceVersion"))
		return
	}
	s.mu.Lock()
	items := []any{}
	for _, p := range s.pods {
		if p.Node == node {
			items = append(items, podJSON(p, s.rv))
		}
	}
	body := map[string]any{"kind": "PodList", "apiVersion": "v1",
		"metadata": map[string]any{"resourceVersion": strconv.Itoa(s.rv)}, "items": items}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, node, rvParam string) {
	from, err := strconv.Atoi(rvParam)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("resourceVersion %q is not a number", rvParam))
		return
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	// The API server sends the headers at once, before any event.
	if flusher != nil {
		flusher.Flush()
	}
	enc := json.NewEncoder(w)
	send := func(ev event) bool {
		var obj any
		switch ev.typ {
		case "ERROR":
			obj = map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
				"message": "too old resource version", "reason": "Expired", "code": 410}
		case "BOOKMARK":
			obj = map[string]any{"kind": "Pod", "apiVersion": "v1",
				"metadata": map[string]any{"resourceVersion": strconv.Itoa(ev.rv)}}
		default:
			if ev.pod.Node != node {
				return true
			}
			obj = podJSON(ev.pod, ev.rv)
		}
		if err := enc.Encode(map[string]any{"type": ev.typ, "object": obj}); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return ev.typ != "ERROR"
	}

	s.mu.Lock()
	if s.srv == nil {
		s.mu.Unlock()
		return
	}
	if from < s.expired {
		s.mu.Unlock()
		send(event{typ: "ERROR"})
		return
	}
	var backlog []event
	for _, ev := range s.history {
		if ev.rv > from {
			backlog = append(backlog, ev)
		}
	}
	ch := make(chan event, 256)
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	for _, ev := range backlog {
		if !send(ev) {
			return
		}
	}
	// timeoutSeconds ends the watch cleanly, as the API server does.
	var timeout <-chan time.Time
	if sec, err := strconv.Atoi(r.URL.Query().Get("timeoutSeconds")); err == nil && sec > 0 {
		timer := time.NewTimer(time.Duration(sec) * time.Second)
		defer timer.Stop()
		timeout = timer.C
	}
	for {
		select {
		case <-timeout:
			return
		case <-r.Context().Done():
			return
		case ev, ok := <-ch:
			if !ok || !send(ev) {
				return
			}
		}
	}
}

func podJSON(p Pod, rv int) map[string]any {
	return map[string]any{
		"kind": "Pod", "apiVersion": "v1",
		"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace,
			"resourceVersion": strconv.Itoa(rv), "labels": p.Labels},
		"spec":   map[string]any{"nodeName": p.Node, "containers": []any{map[string]any{"name": "main", "image": "busybox"}}},
		"status": map[string]any{"phase": "Running"},
	}
}

func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1",
		"status": "Failure", "message": msg, "reason": reason, "code": code})
}

// SetResourceSlice adds or replaces a ResourceSlice, by name.
func (s *Server) SetResourceSlice(rs ResourceSlice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slices == nil {
		s.slices = map[string]ResourceSlice{}
	}
	s.slices[rs.Name] = rs
}

// DeleteResourceSlice removes a ResourceSlice.
func (s *Server) DeleteResourceSlice(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.slices, name)
}

// ServeSliceVersions sets the resource.k8s.io versions whose resourceslices
// are served (v1beta1 and v1 by default); the others answer 404, as on a
// cluster that no longer serves them.
func (s *Server) ServeSliceVersions(versions ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sliceVersions = append([]string{}, versions...)
}

// serveSlices lists ResourceSlices in the shape of the version asked for:
// v1beta1 nests a device's attributes under "basic", v1 does not. The
// fieldSelector spec.driver=... and spec.nodeName=... filters apply.
func (s *Server) serveSlices(w http.ResponseWriter, version string, q url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	versions := s.sliceVersions
	if versions == nil {
		versions = []string{"v1beta1", "v1"}
	}
	if !slices.Contains(versions, version) {
		writeStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		return
	}
	want := map[string]string{}
	if fs := q.Get("fieldSelector"); fs != "" {
		for _, term := range strings.Split(fs, ",") {
			k, v, _ := strings.Cut(term, "=")
			want[k] = v
		}
	}
	items := []any{}
	for _, rs := range s.slices {
		if d, ok := want["spec.driver"]; ok && rs.Driver != d {
			continue
		}
		if n, ok := want["spec.nodeName"]; ok && rs.Node != n {
			continue
		}
		devs := []any{}
		for _, d := range rs.Devices {
			attrs := map[string]any{}
			for k, v := range d.Attributes {
				attrs[k] = map[string]any{"string": v}
			}
			dev := map[string]any{"name": d.Name}
			if version == "v1beta1" {
				dev["basic"] = map[string]any{"attributes": attrs}
			} else {
				dev["attributes"] = attrs
			}
			devs = append(devs, dev)
		}
		items = append(items, map[string]any{
			"metadata": map[string]any{"name": rs.Name},
			"spec": map[string]any{"driver": rs.Driver, "nodeName": rs.Node,
				"pool": map[string]any{"name": rs.Pool, "generation": 1, "resourceSliceCount": 1}, "devices": devs},
		})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/" + version,
		"metadata": map[string]any{"resourceVersion": strconv.Itoa(s.rv)}, "items": items})
}
