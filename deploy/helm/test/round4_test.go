package charttest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestRound4SeccompRuntimeDefault: every container the chart runs has
// the runtime's default seccomp profile, root or not, with the host engine
// sidecar or without (round 4: the chart set no seccompProfile). A
// securityContext given in the values still replaces the chart's.
func TestRound4SeccompRuntimeDefault(t *testing.T) {
	tests := []struct {
		name string
		sets []string
		ctrs []string
	}{
		{"defaults", nil, []string{"gpuscope"}},
		{"sidecar with profiling", []string{"counters.profiling=true", "dcgm.mode=sidecar"}, []string{"gpuscope", "nv-hostengine"}},
		{"rootless sim", []string{"source=sim", "kubernetes.enabled=false"}, []string{"gpuscope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.sets...)
			require.NotNil(t, r.daemonSet)
			for _, name := range tt.ctrs {
				sc := container(t, r.daemonSet, name).SecurityContext
				require.NotNil(t, sc, name)
				require.NotNil(t, sc.SeccompProfile, "%s has no seccompProfile", name)
				assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type, name)
			}
		})
	}
}

// TestRound4NetworkPolicy: the optional NetworkPolicy selects the chart's
// pods and admits the peers given, on the metrics port only; off by
// default (round 4: the samples API is open by default and the chart
// shipped no policy).
func TestRound4NetworkPolicy(t *testing.T) {
	assert.Nil(t, render(t).networkPolicy, "off by default")

	r := render(t, "networkPolicy.enabled=true",
		"networkPolicy.from[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring")
	np := r.networkPolicy
	require.NotNil(t, np)
	require.NotNil(t, r.daemonSet)
	assert.Equal(t, "monitoring", np.Namespace)
	for k, v := range np.Spec.PodSelector.MatchLabels {
		assert.Equal(t, v, r.daemonSet.Spec.Template.Labels[k], "the policy selects the DaemonSet's pods by %s", k)
	}
	assert.NotEmpty(t, np.Spec.PodSelector.MatchLabels)
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)
	require.Len(t, np.Spec.Ingress, 1)
	in := np.Spec.Ingress[0]
	require.Len(t, in.Ports, 1)
	assert.Equal(t, "metrics", in.Ports[0].Port.String())
	require.Len(t, in.From, 1)
	assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": "monitoring"}, in.From[0].NamespaceSelector.MatchLabels)

	open := render(t, "networkPolicy.enabled=true").networkPolicy
	require.NotNil(t, open)
	assert.Empty(t, open.Spec.Ingress[0].From, "no peers given: any peer, on the metrics port only")
}
