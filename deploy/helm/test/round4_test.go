package charttest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
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
