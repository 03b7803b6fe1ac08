// Package configmap reads one key of a Kubernetes ConfigMap through the API
// server, with the pod's service-account token: dcgm-exporter's
// -m/--configmap-data reads its counters this way
// (internal/pkg/counters/counter_config.go, readConfigMap).
package configmap

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/kubeapi"
)

// In-cluster defaults, as every pod sees them.
const (
	DefaultTokenFile = kubeapi.DefaultTokenFile
	DefaultCAFile    = kubeapi.DefaultCAFile
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

// Get returns the value of ref's key. Errors name the ConfigMap and say
// what failed (no access, not found, no such key).
func (c Client) Get(ctx context.Context, ref Ref) (string, error) {
	value, err := c.get(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("ConfigMap %s: %w", ref, err)
	}
	return value, nil
}

func (c Client) get(ctx context.Context, ref Ref) (string, error) {
	api, err := kubeapi.New(c.Server, c.TokenFile, c.CAFile)
	if err != nil {
		return "", fmt.Errorf("%w: a ConfigMap is read from inside a Kubernetes pod", err)
	}
	// The counters are read once, at start: no connection is kept.
	defer api.CloseIdleConnections()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var cm struct {
		Data map[string]string `json:"data"`
	}
	path := "/api/v1/namespaces/" + url.PathEscape(ref.Namespace) + "/configmaps/" + url.PathEscape(ref.Name)
	err = api.GetJSON(ctx, path, maxBody, &cm)
	var se *kubeapi.StatusError
	switch {
	case err == nil:
	case errors.As(err, &se) && se.Code == http.StatusNotFound:
		return "", errors.New("not found")
	case errors.As(err, &se) && se.Forbidden():
		return "", fmt.Errorf("the API server answered %s: the service account needs get on configmaps in %s", se.Status, ref.Namespace)
	case errors.As(err, &se):
		return "", fmt.Errorf("the API server answered %s", se.Status)
	default:
		return "", err
	}
	v, ok := cm.Data[ref.Key]
	if !ok {
		return "", fmt.Errorf("no %q key", ref.Key)
	}
	return v, nil
}
