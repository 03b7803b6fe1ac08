package simpods

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gpuscope/gpuscope/source"
)

func TestLayoutOfEightGPUs(t *testing.T) {
	e := New(8)
	want := []string{"llama-train-0", "llama-train-0", "llama-train-0", "llama-train-0", "notebook-7f9c", "notebook-7f9c", "", ""}
	for i, w := range want {
		ent := source.NewGPU(i, "GPU-x", "", "")
		v := e.Values(&ent)
		if w == "" {
			assert.Nil(t, v, "GPU %d is unallocated", i)
			continue
		}
		assert.Equal(t, w, v[0], "GPU %d", i)
	}
	assert.Equal(t, []int{5}, IdleGPUs(8), "the notebook's last GPU idles")
	assert.Nil(t, IdleGPUs(1), "one GPU: it trains")
}

func TestFreeAndNotebookGPUs(t *testing.T) {
	// 8 GPUs: 0-3 training, 4-5 notebook (5 left idle), 6-7 free.
	assert.Equal(t, []int{6, 7}, FreeGPUs(8))
	assert.Equal(t, []int{4}, NotebookGPUs(8))
	assert.Equal(t, []int{5}, IdleGPUs(8))
}

func TestLayoutOfPodsOnGPUsAndMIGInstances(t *testing.T) {
	train := Pod{Namespace: "ml", Name: "train-0", Container: "trainer"}
	nb := Pod{Namespace: "research", Name: "nb-1", Container: "jupyter"}
	e := NewLayout([]Holder{{GPU: 1, GPUInstanceID: -1, Pod: train}, {GPU: 0, GPUInstanceID: 2, Pod: nb}})
	gpu := func(i int) *source.Entity { ent := source.NewGPU(i, "GPU-x", "", ""); return &ent }
	inst := func(i, gi int) *source.Entity {
		ent := source.NewGPU(i, "GPU-x", "", "")
		ent.Kind, ent.GPUInstanceID = source.GPUInstance, gi
		return &ent
	}
	assert.Equal(t, []string{"train-0", "ml", "trainer"}, e.Values(gpu(1)))
	assert.Nil(t, e.Values(gpu(0)), "a MIG GPU is held through its instances")
	assert.Equal(t, []string{"nb-1", "research", "jupyter"}, e.Values(inst(0, 2)))
	assert.Nil(t, e.Values(inst(0, 1)), "an instance nobody holds")
	assert.Nil(t, e.Values(gpu(5)), "a GPU beyond the layout")

	// A process belongs to the pod that holds its GPU or MIG instance.
	for _, tt := range []struct {
		ent  *source.Entity
		want []string
	}{
		{gpu(1), []string{"train-0", "ml", "trainer"}},
		{inst(0, 2), []string{"nb-1", "research", "jupyter"}},
		{inst(0, 1), nil},
		{gpu(5), nil},
	} {
		pod, ns, ctr, ok := e.ProcessPod(tt.ent, 7)
		if tt.want == nil {
			assert.False(t, ok, "no pod holds %v", tt.ent)
			continue
		}
		assert.True(t, ok)
		assert.Equal(t, tt.want, []string{pod, ns, ctr})
	}
}
