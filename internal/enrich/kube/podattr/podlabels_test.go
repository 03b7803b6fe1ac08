package podattr

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
	"github.com/gpuscope/gpuscope/source"
)

// staticLabels is a PodLabelSource whose labels the test sets.
type staticLabels struct {
	mu   sync.Mutex
	pods map[string][]enrich.Label
	gen  uint64
}

func (s *staticLabels) Labels(namespace, pod string) []enrich.Label {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods[namespace+"/"+pod]
}

func (s *staticLabels) MaxLabels() int { return 8 }

func (s *staticLabels) Generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

func (s *staticLabels) set(key string, l []enrich.Label) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[key] = l
	s.gen++
}

func TestExtraLabelsOnlyForTheSinglePodOfADevice(t *testing.T) {
	pods := []kubelettest.Pod{
		gpuPod("ml", "train-0", "trainer", "nvidia.com/gpu", uuid0),
		gpuPod("ml", "a", "c", "nvidia.com/gpu", uuid1+"::0"),
		gpuPod("ml", "b", "c", "nvidia.com/gpu", uuid1+"::1"),
		gpuPod("ml", "mig", "infer", "nvidia.com/mig-1g.10gb", mig0),
	}
	team := []enrich.Label{{Name: "team", Value: "vision"}}
	labels := &staticLabels{pods: map[string][]enrich.Label{
		"ml/train-0": team,
		"ml/a":       {{Name: "team", Value: "a"}},
		"ml/b":       {{Name: "team", Value: "b"}},
		"ml/mig":     {{Name: "team", Value: "inference"}},
	}}
	srv := startKubelet(t, pods)
	e, _ := newEnricher(t, Config{Socket: srv.Socket(), PodLabels: labels})
	require.NoError(t, e.Refresh(context.Background()))

	nvlink := gpuEntity(0, uuid0)
	nvlink.Kind, nvlink.Link = source.NVLink, 1
	tests := []struct {
		name string
		ent  *source.Entity
		want []enrich.Label
	}{
		{"exclusive GPU", gpuEntity(0, uuid0), team},
		{"its NVLink", nvlink, team},
		{"MIG instance", migEntity(2, uuid2, mig0, 3), []enrich.Label{{Name: "team", Value: "inference"}}},
		{"GPU shared by two pods", gpuEntity(1, uuid1), nil},
		{"GPU of no pod", gpuEntity(3, "GPU-00000000-0000-4000-8000-000000000003"), nil},
		{"no entity", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, e.ExtraLabels(tt.ent))
		})
	}

	gen := e.Generation()
	labels.set("ml/train-0", []enrich.Label{{Name: "team", Value: "speech"}})
	assert.NotEqual(t, gen, e.Generation(), "a change of an attributed pod's labels must invalidate cached label strings")
	assert.Equal(t, []enrich.Label{{Name: "team", Value: "speech"}}, e.ExtraLabels(gpuEntity(0, uuid0)))
}

func TestNoExtraLabelsWithoutASource(t *testing.T) {
	srv := startKubelet(t, []kubelettest.Pod{gpuPod("ml", "train-0", "trainer", "nvidia.com/gpu", uuid0)})
	e, _ := newEnricher(t, Config{Socket: srv.Socket()})
	require.NoError(t, e.Refresh(context.Background()))
	require.NotNil(t, e.Values(gpuEntity(0, uuid0)))
	assert.Nil(t, e.ExtraLabels(gpuEntity(0, uuid0)))
}
