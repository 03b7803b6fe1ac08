package podlabels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/kubeapi"
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

func (w *Watcher) podsPath(q url.Values) string {
	q.Set("fieldSelector", "spec.nodeName="+w.cfg.NodeName)
	return "/api/v1/pods?" + q.Encode()
}

// get sends an authenticated GET; a refusal names the permissions the
// watch needs.
func (w *Watcher) get(ctx context.Context, path string) (*http.Response, error) {
	resp, err := w.api.Get(ctx, path)
	var se *kubeapi.StatusError
	if errors.As(err, &se) && se.Forbidden() {
		return nil, fmt.Errorf("%w (the service account needs get, list and watch on pods: see docs/kubernetes.md)", err)
	}
	return resp, err
}

// list replaces the pods with those of a LIST and returns its
// resourceVersion.
func (w *Watcher) list(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	path := w.podsPath(url.Values{})
	u := w.api.URL(path)
	resp, err := w.get(ctx, path)
	if err != nil {
		return "", fmt.Errorf("listing pods: %w", err)
	}
	defer resp.Body.Close()
	var l podList
	if err := json.NewDecoder(kubeapi.NewBoundedReader(resp.Body, maxListBytes)).Decode(&l); err != nil {
		return "", fmt.Errorf("listing pods: decoding the answer of GET %s: %w", u, err)
	}
	if l.Metadata.ResourceVersion == "" {
		return "", fmt.Errorf("listing pods: GET %s: the answer has no resourceVersion", u)
	}
	w.replace(l.Items)
	w.lastList.Store(w.cfg.Clock.Now().Unix())
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
	path := w.podsPath(q)
	u := w.api.URL(path)
	resp, err := w.get(ctx, path)
	var se *kubeapi.StatusError
	if errors.As(err, &se) && se.Code == http.StatusGone {
		// The resourceVersion is too old to watch from: only a new LIST
		// helps. A LIST's own 410 is a failure like any other.
		return rv, fmt.Errorf("watching pods: GET %s: %s: %w", se.URL, se.Message, errGone)
	}
	if err != nil {
		return rv, fmt.Errorf("watching pods: %w", err)
	}
	defer resp.Body.Close()
	established()
	started := time.Now()
	br := kubeapi.NewBoundedReader(resp.Body, maxEventBytes)
	dec := json.NewDecoder(br)
	for {
		br.Left = maxEventBytes
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
