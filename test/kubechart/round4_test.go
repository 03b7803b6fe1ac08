package kubechart

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRound4NetworkPolicyAndSeccompOnTheServer installs the chart with its
// optional NetworkPolicy, peers given, on a real API server: the policy
// and the DaemonSet with its seccomp profiles validate strictly and
// install (round 4, chart).
func TestRound4NetworkPolicyAndSeccompOnTheServer(t *testing.T) {
	cp := bare.Get(t)
	r := newRelease(t, cp, "--set", "networkPolicy.enabled=true",
		"--set", "networkPolicy.from[0].namespaceSelector.matchLabels.team=monitoring")
	objs := r.validate(t)
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o["kind"].(string)] = true
	}
	assert.True(t, kinds["NetworkPolicy"], "rendered a NetworkPolicy")
	r.install(t)
	r.upgradeAndUninstall(t)
}
