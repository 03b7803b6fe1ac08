package charttest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// lastApplied is the annotation in which `kubectl apply` keeps the whole
// object it applied, as JSON.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// annotationsLimit is the API server's bound on the keys and values of an
// object's annotations together (apimachinery's TotalAnnotationSizeLimitB):
// an object whose JSON is larger cannot be created with `kubectl apply`.
const annotationsLimit = 256 << 10

// Every object of the plain manifests fits in kubectl apply's annotation,
// the dashboards' ConfigMap above all, which grows with every panel.
// encoding/json escapes as kubectl's encoder does (<, > and & as \u003c...),
// which PromQL's comparisons make count.
func TestPlainManifestsFitKubectlApply(t *testing.T) {
	b, err := os.ReadFile(renderManifests(t))
	require.NoError(t, err)
	var objects int
	for i, doc := range strings.Split(string(b), "\n---") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj), "document %d", i)
		js, err := json.Marshal(obj)
		require.NoError(t, err, "document %d", i)
		meta, _ := obj["metadata"].(map[string]any)
		size := len(lastApplied) + len(js) + 1 // kubectl ends the value with a newline
		t.Logf("%s %v: %d bytes of %d in kubectl apply's annotation", obj["kind"], meta["name"], size, annotationsLimit)
		assert.Less(t, size, annotationsLimit, "%s %v is too large for kubectl apply's %s annotation: "+
			"kubectl apply --server-side, or kubectl create, still apply it", obj["kind"], meta["name"], lastApplied)
		objects++
	}
	assert.NotZero(t, objects)
}
