package kubechart

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/kubetest"
)

// grant is a resource the exporter reads, with get, list and watch: pods
// for --kubernetes-pod-labels (internal/enrich/kube/podlabels lists and
// watches them on every namespace), resourceslices for
// --kubernetes-enable-dra (internal/enrich/kube/draslices lists them). DRA
// claims are not read from the API server: the kubelet's PodResources
// answer names each claim's devices.
type grant struct{ group, resource string }

var (
	pods           = grant{"", "pods"}
	resourceSlices = grant{"resource.k8s.io", "resourceslices"}
)

// probes are the resources asked about: those the exporter reads, and
// those it must never be able to read or change.
var probes = []grant{
	pods, resourceSlices,
	{"resource.k8s.io", "resourceclaims"},
	{"", "configmaps"}, {"", "secrets"}, {"", "nodes"}, {"", "services"}, {"", "serviceaccounts"},
	{"", "pods/log"}, {"", "pods/exec"},
	{"apps", "daemonsets"},
	{"monitoring.coreos.com", "servicemonitors"},
	{"rbac.authorization.k8s.io", "clusterroles"},
}

var verbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// readVerbs is what the exporter does with the resources it reads.
var readVerbs = map[string]bool{"get": true, "list": true, "watch": true}

// TestServiceAccountMayReadExactlyWhatTheExporterReads installs the chart
// with each configuration that reads the API server, takes a token of the
// service account it creates from the TokenRequest API, and asks the
// server's authorizer (SelfSubjectAccessReview) about every verb on every
// probed resource, cluster-wide and in two namespaces: exactly the reads the
// configuration needs are allowed. A chart that drops a verb the exporter
// needs, or grants one it does not, fails here.
func TestServiceAccountMayReadExactlyWhatTheExporterReads(t *testing.T) {
	cp := serverWithOperator(t)
	cases := []struct {
		name    string
		args    []string
		granted []grant
	}{
		{"defaults", nil, nil},
		{"pod labels", []string{"--set", "kubernetes.podLabels.allowlist=team"}, []grant{pods}},
		{"DRA", []string{"--set", "kubernetesDRA.enabled=true"}, []grant{resourceSlices}},
		{"pod labels and DRA", []string{"--set", "kubernetes.podLabels.allowlist=team", "--set", "kubernetesDRA.enabled=true"}, []grant{pods, resourceSlices}},
		{"every optional object", allOptional, []grant{pods, resourceSlices}},
		{"pod labels without the chart's RBAC", []string{"--set", "kubernetes.podLabels.allowlist=team", "--set", "kubernetes.rbac.create=false"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRelease(t, cp, tc.args...)
			r.install(t)
			sa := serviceAccountName(t, r.installed)
			token, err := cp.ServiceAccountToken(context.Background(), r.ns, sa)
			require.NoError(t, err)
			client, err := cp.Client(token)
			require.NoError(t, err)
			granted := map[grant]bool{}
			for _, g := range tc.granted {
				granted[g] = true
			}
			for _, g := range probes {
				for _, ns := range []string{"", r.ns, "default"} {
					for _, verb := range verbs {
						a := kubetest.Access{Verb: verb, Group: g.group, Resource: g.resource, Namespace: ns}
						allowed, err := client.CanI(context.Background(), a)
						require.NoError(t, err)
						assert.Equal(t, granted[g] && readVerbs[verb], allowed, "may the service account %s/%s %s?", r.ns, sa, a)
					}
				}
			}
			_, err = cp.Helm(t, "uninstall", r.name, "--namespace", r.ns)
			require.NoError(t, err)
		})
	}
}

func serviceAccountName(t *testing.T, objs []kubetest.Object) string {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "ServiceAccount" {
			return name(o)
		}
	}
	t.Fatal("the release has no ServiceAccount")
	return ""
}
