package podattr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/podresources"
)

// list asks the kubelet for its pods. The enricher keeps one client, and
// with it one transport, for its life: a transport made anew after each
// failure would leave the old one's connection, and its reader, behind.
func (e *Enricher) list(ctx context.Context) (*podresources.ListResponse, error) {
	if _, err := os.Stat(e.cfg.Socket); err != nil {
		e.closeConn()
		return nil, fmt.Errorf("kubelet pod-resources socket %s: %w", e.cfg.Socket, err)
	}
	e.mu.Lock()
	if e.client == nil {
		e.client = podresources.NewWithOptions(e.cfg.Socket, podresources.Options{
			Limits: podresources.Limits{MaxMessageBytes: e.cfg.MaxRecvMsgSize},
			OnDrop: e.connectionDropped,
		})
	}
	client := e.client
	e.mu.Unlock()

	timeout := min(e.cfg.RefreshInterval, 10*time.Second)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := client.List(cctx)
	if err != nil {
		// A fresh connection next time: after a kubelet restart the socket
		// is a new file, and a kubelet that did not answer holds the old
		// connection until it is closed.
		e.closeConn()
		e.logRefused(err)
		return nil, fmt.Errorf("kubelet pod-resources List on %s: %w", e.cfg.Socket, err)
	}
	return resp, nil
}

// closeConn closes every connection to the kubelet, busy ones included.
func (e *Enricher) closeConn() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client != nil {
		e.client.Close()
	}
}

// logRefused says once per limit why an answer was refused: the outage
// warning names only the first error of an outage.
func (e *Enricher) logRefused(err error) {
	var le *podresources.LimitError
	var tl *podresources.TooLargeError
	switch {
	case errors.As(err, &le):
		e.logOnce("refused/"+le.What, func() {
			e.log.WithError(err).WithField("socket", e.cfg.Socket).
				Warn("kubelet answer refused: it holds more than a node runs; keeping the last pod labels for the grace period (logged once per limit)")
		})
	case errors.As(err, &tl):
		e.logOnce("refused/size", func() {
			e.log.WithError(err).WithField("socket", e.cfg.Socket).
				Warn("kubelet answer refused: larger than the message limit; keeping the last pod labels for the grace period (logged once)")
		})
	}
}

// connectionDropped counts a connection the client dropped for a flood of
// control frames, and logs the first.
func (e *Enricher) connectionDropped(err error) {
	e.connDrops.Inc()
	e.logOnce("flood", func() {
		e.log.WithError(err).WithField("socket", e.cfg.Socket).
			Warn("kubelet connection dropped: it sent control frames without end; the next refresh dials again (logged once, counted in gpuscope_kubernetes_connections_dropped_total)")
	})
}

func newConnDropsCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gpuscope_kubernetes_connections_dropped_total",
		Help: "Connections to the kubelet PodResources API dropped because the kubelet sent more control frames (PING, SETTINGS, ...) between two calls than a call needs.",
	})
}
