package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ChartDir is the gpuscope chart's folder.
func ChartDir() string { return filepath.Join(repoRoot(), "deploy", "helm", "gpuscope") }

// HelmBin finds the helm CLI that scripts/install-helm.sh installs; where
// it is missing the test is skipped, or fails under CI=true.
func HelmBin(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("helm not found: run scripts/install-helm.sh")
	}
	t.Skip("helm not found: run scripts/install-helm.sh")
	return ""
}

// HelmResult is what one helm command printed.
type HelmResult struct {
	Stdout, Stderr string
}

// Helm runs the helm CLI against the control plane (its kubeconfig, a
// private Helm cache and configuration folder).
func (c *ControlPlane) Helm(t testing.TB, args ...string) (HelmResult, error) {
	t.Helper()
	cmd := exec.Command(HelmBin(t), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	home := filepath.Join(c.dir, "helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := HelmResult{Stdout: stdout.String(), Stderr: stderr.String()}
	if err != nil {
		return r, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, r.Stderr)
	}
	return r, nil
}

// RenderForServer renders a release as `helm install` would install it on
// this server (its version and APIs in .Capabilities), without installing
// it, and returns its objects.
func (c *ControlPlane) RenderForServer(t testing.TB, release, namespace, chart string, args ...string) ([]Object, error) {
	t.Helper()
	r, err := c.Helm(t, append([]string{"install", release, chart, "--namespace", namespace, "--dry-run=server", "-o", "json"}, args...)...)
	if err != nil {
		return nil, err
	}
	var rel struct {
		Manifest string `json:"manifest"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rel); err != nil {
		return nil, fmt.Errorf("helm install --dry-run=server -o json: %w", err)
	}
	return DecodeYAML(strings.NewReader(rel.Manifest))
}

// Resource is where the API server serves a kind.
type Resource struct {
	// Path is the collection's path, with NAMESPACE in place of the
	// namespace of a namespaced kind.
	Path       string
	Namespaced bool
}

// ResourceOf finds the collection of an object's kind through the server's
// discovery: an error names a kind the server does not serve (a CRD that is
// not installed).
func (c *Client) ResourceOf(ctx context.Context, obj Object) (Resource, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	base := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		base = "/api/" + apiVersion
	}
	var list struct {
		Resources []struct {
			Name       string `json:"name"`
			Kind       string `json:"kind"`
			Namespaced bool   `json:"namespaced"`
		} `json:"resources"`
	}
	if err := c.Get(ctx, base, &list); err != nil {
		return Resource{}, fmt.Errorf("%s %s: the server does not serve the API: %w", apiVersion, kind, err)
	}
	for _, r := range list.Resources {
		if r.Kind == kind && !strings.Contains(r.Name, "/") {
			if r.Namespaced {
				return Resource{Path: base + "/namespaces/NAMESPACE/" + r.Name, Namespaced: true}, nil
			}
			return Resource{Path: base + "/" + r.Name}, nil
		}
	}
	return Resource{}, fmt.Errorf("%s %s: the server serves no such kind", apiVersion, kind)
}

// ObjectPath is the path of obj on the server, in namespace when the kind
// is namespaced and the object names none.
func (c *Client) ObjectPath(ctx context.Context, obj Object, namespace string) (string, error) {
	r, err := c.ResourceOf(ctx, obj)
	if err != nil {
		return "", err
	}
	meta, _ := obj["metadata"].(Object)
	if ns, _ := meta["namespace"].(string); ns != "" {
		namespace = ns
	}
	name, _ := meta["name"].(string)
	return strings.Replace(r.Path, "NAMESPACE", url.PathEscape(namespace), 1) + "/" + url.PathEscape(name), nil
}

// ValidateStrict asks the server to create obj without storing it
// (dryRun=All) under strict field validation: the answer is an error for
// anything the server's schema refuses, unknown and duplicate fields
// included, as a CRD's structural schema and the built-in types check them.
func (c *Client) ValidateStrict(ctx context.Context, obj Object, namespace string) error {
	p, err := c.ObjectPath(ctx, obj, namespace)
	if err != nil {
		return err
	}
	collection := p[:strings.LastIndex(p, "/")]
	warnings, err := c.Do(ctx, http.MethodPost, collection+"?dryRun=All&fieldValidation=Strict", obj, nil)
	if err != nil {
		return err
	}
	if len(warnings) > 0 {
		return fmt.Errorf("%s: the server warned: %s", p, strings.Join(warnings, "; "))
	}
	return nil
}
