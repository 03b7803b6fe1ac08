// Package draslices maps the devices of the NVIDIA DRA driver to GPUs: it
// lists the driver's ResourceSlices through the API server and keeps, for
// each (pool, device) pair, the GPU's UUID and, for a MIG device, its MIG
// UUID and profile. Pod attribution of GPUs allocated through DRA
// ResourceClaims (--kubernetes-enable-dra) looks the kubelet's claim
// devices up here, as dcgm-exporter's DRAResourceSliceManager does
// (internal/pkg/transformation/dra.go).
package draslices

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/kubeapi"
	"github.com/gpuscope/gpuscope/internal/logonce"
)

// Driver is the NVIDIA DRA GPU driver's name; slices of other drivers are
// not read (dcgm-exporter's DRAGPUDriverName, transformation/const.go).
const Driver = "gpu.nvidia.com"

// Defaults of Config.
const (
	DefaultTokenFile  = kubeapi.DefaultTokenFile
	DefaultCAFile     = kubeapi.DefaultCAFile
	DefaultInterval   = 30 * time.Second
	DefaultMaxDevices = 4096
	// maxBody bounds one answer: thousands of devices fit in a few MiB.
	maxBody = 64 << 20
)

// versions are tried in order: v1beta1 is what dcgm-exporter reads; v1 is
// the only one a cluster that dropped the beta serves.
var versions = []string{"v1beta1", "v1"}

// Device is what a DRA device is on the node.
type Device struct {
	// UUID is the GPU's UUID; for a MIG device, its parent GPU's.
	UUID string
	// MIGUUID and Profile are set for MIG devices.
	MIGUUID, Profile string
}

// Config configures the watcher.
type Config struct {
	// Server is the API server's base URL; empty: https:// with
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
	Server    string
	TokenFile string
	CAFile    string
	// Node, when set, lists only the slices of this node; claims of the
	// node's pods name its own GPUs.
	Node string
	// Interval is how often the slices are listed again.
	Interval time.Duration
	// MaxDevices bounds the devices kept.
	MaxDevices int
	Logger     logrus.FieldLogger
}

// Watcher keeps the device map. Lookup answers from memory.
type Watcher struct {
	cfg     Config
	log     logrus.FieldLogger
	logged  *logonce.Set
	devices atomic.Pointer[map[string]Device]
	up      atomic.Bool

	api *kubeapi.Client

	mu      sync.Mutex
	version string // the version that answered last
}

// New checks the configuration; Run starts listing.
func New(cfg Config) (*Watcher, error) {
	if cfg.TokenFile == "" {
		cfg.TokenFile = DefaultTokenFile
	}
	if cfg.CAFile == "" {
		cfg.CAFile = DefaultCAFile
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxDevices <= 0 {
		cfg.MaxDevices = DefaultMaxDevices
	}
	if cfg.Logger == nil {
		cfg.Logger = logrus.StandardLogger()
	}
	if cfg.Server == "" {
		s, err := kubeapi.InClusterServer()
		if err != nil {
			return nil, fmt.Errorf("%w: ResourceSlices are read through the API server, from inside a pod", err)
		}
		cfg.Server = s
	}
	w := &Watcher{cfg: cfg, log: cfg.Logger.WithField("component", "draslices"), logged: logonce.New(256),
		api: &kubeapi.Client{Server: cfg.Server, TokenFile: cfg.TokenFile, CAFile: cfg.CAFile, MaxIdleConns: 1}}
	empty := map[string]Device{}
	w.devices.Store(&empty)
	return w, nil
}

// Lookup returns the device a claim's (pool, device) pair names.
func (w *Watcher) Lookup(pool, device string) (Device, bool) {
	d, ok := (*w.devices.Load())[pool+"/"+device]
	return d, ok
}

// Up says whether the last listing succeeded.
func (w *Watcher) Up() bool { return w.up.Load() }

// Run lists the slices every interval until ctx ends. A failed listing keeps
// the last map: DRA devices do not move between GPUs.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	failing := false
	for {
		err := w.Refresh(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			w.log.WithError(err).Warn("cannot list the DRA ResourceSlices; keeping the last device map and retrying")
			failing = true
		case err == nil && failing:
			w.log.Info("DRA ResourceSlices listed again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh lists the slices once and replaces the device map.
func (w *Watcher) Refresh(ctx context.Context) error {
	list, err := w.list(ctx)
	if err != nil {
		w.up.Store(false)
		return err
	}
	m := map[string]Device{}
	for _, rs := range list.Items {
		if rs.Spec.Driver != Driver {
			continue
		}
		for _, d := range rs.Spec.Devices {
			attrs := d.Attributes
			if d.Basic != nil && d.Basic.Attributes != nil {
				attrs = d.Basic.Attributes
			}
			key := rs.Spec.Pool.Name + "/" + d.Name
			// dcgm-exporter, dra.go onAddOrUpdate: a "gpu" maps to its uuid,
			// a "mig" to its parentUUID with its uuid and profile; a MIG
			// device without a parent, or another type, maps to nothing.
			var dev Device
			switch typ := attrs.str("type"); typ {
			case "gpu":
				dev.UUID = attrs.str("uuid")
			case "mig":
				dev = Device{UUID: attrs.str("parentUUID"), MIGUUID: attrs.str("uuid"), Profile: attrs.str("profile")}
			default:
				w.logged.Do("type/"+typ, func() {
					w.log.WithFields(logrus.Fields{"device": key, "type": typ}).Warn("DRA device of an unknown type; its pods get no labels (logged once per type)")
				})
			}
			if dev.UUID == "" {
				continue
			}
			if len(m) >= w.cfg.MaxDevices {
				w.logged.Do("overflow", func() {
					w.log.WithField("max_devices", w.cfg.MaxDevices).Warn("more DRA devices than the cap; the rest get no pod labels (logged once)")
				})
				break
			}
			m[key] = dev
		}
	}
	w.devices.Store(&m)
	w.up.Store(true)
	return nil
}

type attributes map[string]struct {
	String *string `json:"string"`
}

func (a attributes) str(k string) string {
	if v, ok := a[k]; ok && v.String != nil {
		return *v.String
	}
	return ""
}

type sliceList struct {
	Items []struct {
		Spec struct {
			Driver string `json:"driver"`
			Pool   struct {
				Name string `json:"name"`
			} `json:"pool"`
			Devices []struct {
				Name string `json:"name"`
				// v1beta1 nests the attributes under basic; v1 does not.
				Basic *struct {
					Attributes attributes `json:"attributes"`
				} `json:"basic"`
				Attributes attributes `json:"attributes"`
			} `json:"devices"`
		} `json:"spec"`
	} `json:"items"`
}

// list asks the version that answered last, or each in turn until one
// exists on the server.
func (w *Watcher) list(ctx context.Context) (*sliceList, error) {
	w.mu.Lock()
	tryFirst := w.version
	w.mu.Unlock()
	order := versions
	if tryFirst != "" {
		order = append([]string{tryFirst}, versions...)
	}
	var lastErr error
	for i, v := range order {
		if i > 0 && v == tryFirst {
			continue
		}
		list, err := w.listVersion(ctx, v)
		if errors.Is(err, errNotServed) {
			lastErr = err
			continue
		}
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		w.version = v
		w.mu.Unlock()
		return list, nil
	}
	return nil, lastErr
}

var errNotServed = errors.New("not served")

func (w *Watcher) listVersion(ctx context.Context, version string) (*sliceList, error) {
	sel := "spec.driver=" + Driver
	if w.cfg.Node != "" {
		sel += ",spec.nodeName=" + w.cfg.Node
	}
	path := "/apis/resource.k8s.io/" + version + "/resourceslices?fieldSelector=" + url.QueryEscape(sel)
	ctx, cancel := context.WithTimeout(ctx, min(w.cfg.Interval, 30*time.Second))
	defer cancel()
	var list sliceList
	err := w.api.GetJSON(ctx, path, maxBody, &list)
	var se *kubeapi.StatusError
	switch {
	case err == nil:
		return &list, nil
	case errors.As(err, &se) && se.Code == http.StatusNotFound:
		return nil, fmt.Errorf("resource.k8s.io/%s resourceslices: %w by the API server", version, errNotServed)
	case errors.As(err, &se) && se.Forbidden():
		return nil, fmt.Errorf("the API server answered %s: the service account needs list on resourceslices (resource.k8s.io); the chart grants it with kubernetesDRA.enabled", se.Status)
	default:
		return nil, fmt.Errorf("listing resourceslices (resource.k8s.io/%s): %w", version, err)
	}
}
