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
