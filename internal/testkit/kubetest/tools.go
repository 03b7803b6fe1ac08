package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// repoRoot is the repository's root, found from this file's place in it.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// script runs one of the repository's scripts that print a path on their
// last line (the tool builders), or returns the path the variable env
// names. The scripts build once and then answer at once from their cache.
func script(env, name string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	cmd := exec.Command(filepath.Join(repoRoot(), "scripts", name))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/%s (or set %s): %w: %s", name, env, err, tailOf(stderr.String(), 2000))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// Binaries returns etcd and kube-apiserver: those GPUSCOPE_ETCD and
// GPUSCOPE_KUBE_APISERVER name (scripts/test.sh sets both), or else those
// scripts/build-etcd.sh and scripts/build-kube-apiserver.sh build once and
// cache.
func Binaries() (etcd, apiserver string, err error) {
	if etcd, err = script("GPUSCOPE_ETCD", "build-etcd.sh"); err != nil {
		return "", "", err
	}
	if apiserver, err = script("GPUSCOPE_KUBE_APISERVER", "build-kube-apiserver.sh"); err != nil {
		return "", "", err
	}
	return etcd, apiserver, nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Shared is one control plane for the tests of a package, started by the
// first test that asks for it; TestMain calls Stop after m.Run.
type Shared struct {
	Options Options
	once    sync.Once
	cp      *ControlPlane
	err     error
	skip    string
}

// Get returns the control plane, starting it the first time. Where the
// binaries cannot be found or built the test is skipped, saying why, and
// fails instead under CI=true, where scripts/test.sh builds them first.
func (s *Shared) Get(t testing.TB) *ControlPlane {
	t.Helper()
	s.once.Do(func() {
		if s.Options.EtcdBin == "" || s.Options.APIServerBin == "" {
			etcd, api, err := Binaries()
			if err != nil {
				s.skip = "no etcd and kube-apiserver: " + err.Error()
				return
			}
			s.Options.EtcdBin, s.Options.APIServerBin = etcd, api
		}
		s.cp, s.err = Start(s.Options)
	})
	switch {
	case s.skip != "" && os.Getenv("CI") == "true":
		t.Fatal(s.skip)
	case s.skip != "":
		t.Skip(s.skip)
	case s.err != nil:
		t.Fatalf("starting the control plane: %v", s.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", s.cp.Logs())
		}
	})
	return s.cp
}

// Stop stops the control plane if it was started.
func (s *Shared) Stop() {
	if s.cp != nil {
		s.cp.Stop()
	}
}

// ServiceAccountToken asks the TokenRequest API for a token of the service
// account, signed with the control plane's service-account key.
func (c *ControlPlane) ServiceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	admin, err := c.Admin()
	if err != nil {
		return "", err
	}
	req := Object{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": Object{"expirationSeconds": 3600}}
	var out struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	path := "/api/v1/namespaces/" + namespace + "/serviceaccounts/" + name + "/token"
	if _, err := admin.Do(ctx, http.MethodPost, path, req, &out); err != nil {
		return "", fmt.Errorf("token of service account %s/%s: %w", namespace, name, err)
	}
	return out.Status.Token, nil
}

// CreateNamespace creates a namespace and its default service account,
// which the controller manager would create and the ServiceAccount
// admission plugin requires of every pod.
func (c *ControlPlane) CreateNamespace(ctx context.Context, name string) error {
	admin, err := c.Admin()
	if err != nil {
		return err
	}
	if _, err := admin.Create(ctx, "/api/v1/namespaces", Object{"apiVersion": "v1", "kind": "Namespace",
		"metadata": Object{"name": name}}); err != nil && !IsStatus(err, http.StatusConflict) {
		return err
	}
	_, err = admin.Create(ctx, "/api/v1/namespaces/"+name+"/serviceaccounts", Object{"apiVersion": "v1",
		"kind": "ServiceAccount", "metadata": Object{"name": "default"}})
	if err != nil && !IsStatus(err, http.StatusConflict) {
		return err
	}
	return nil
}

// etcdPost sends one request of etcd's JSON gateway.
func (c *ControlPlane) etcdPost(path string, body, out any) error {
	b, _ := json.Marshal(body)
	resp, err := http.Post(c.EtcdURL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, rb)
	}
	return json.Unmarshal(rb, out)
}

// EtcdRevision is etcd's current revision: the resourceVersion of the
// latest write of any object.
func (c *ControlPlane) EtcdRevision() (int64, error) {
	var out struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := c.etcdPost("/v3/kv/range", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/"))}, &out); err != nil {
		return 0, err
	}
	return strconv.ParseInt(out.Header.Revision, 10, 64)
}

// Compact compacts etcd's history up to its current revision, as the API
// server does every five minutes: a watch from an older resourceVersion
// then expires (410 Gone). It returns the revision.
func (c *ControlPlane) Compact() (int64, error) {
	rev, err := c.EtcdRevision()
	if err != nil {
		return 0, err
	}
	var out map[string]any
	if err := c.etcdPost("/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, &out); err != nil {
		return 0, err
	}
	return rev, nil
}

// PrometheusOperatorCRDs is the folder of the Prometheus Operator's CRDs
// (its module's example/prometheus-operator-crd), from
// GPUSCOPE_PROMETHEUS_OPERATOR_CRDS or scripts/fetch-prometheus-operator-crds.sh.
func PrometheusOperatorCRDs() (string, error) {
	return script("GPUSCOPE_PROMETHEUS_OPERATOR_CRDS", "fetch-prometheus-operator-crds.sh")
}

// InstallCRDs creates the CustomResourceDefinitions of the YAML files
// (those that exist already are kept) and waits until each is established.
func (c *ControlPlane) InstallCRDs(ctx context.Context, files ...string) error {
	admin, err := c.Admin()
	if err != nil {
		return err
	}
	var names []string
	for _, f := range files {
		objs, err := ReadYAML(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if _, err := admin.Create(ctx, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", o); err != nil && !IsStatus(err, http.StatusConflict) {
				return fmt.Errorf("%s: %w", f, err)
			}
			names = append(names, o["metadata"].(Object)["name"].(string))
		}
	}
	for _, name := range names {
		if err := c.waitEstablished(ctx, admin, name); err != nil {
			return err
		}
	}
	return nil
}

func (c *ControlPlane) waitEstablished(ctx context.Context, admin *Client, name string) error {
	var last error
	ok := testwait.Every(readyTimeout, 100*time.Millisecond, func() bool {
		var crd struct {
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		}
		if last = admin.Get(ctx, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name, &crd); last != nil {
			return false
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == "Established" && cond.Status == "True" {
				return true
			}
		}
		return false
	})
	if !ok {
		return fmt.Errorf("CRD %s not established within %s: %v", name, readyTimeout, last)
	}
	return nil
}

// ReadYAML decodes every document of a YAML file (or stream) into objects,
// skipping empty ones.
func ReadYAML(path string) ([]Object, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	objs, err := DecodeYAML(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// DecodeYAML decodes every document of a YAML stream into objects,
// skipping empty ones.
func DecodeYAML(r io.Reader) ([]Object, error) {
	dec := yaml.NewDecoder(r)
	var out []Object
	for {
		var o Object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
}
