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
