package simjobs

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gpuscope/gpuscope/source"
)

func TestJobsLabelTheirGPUsAndInstances(t *testing.T) {
	e := New(map[int]string{0: "4242", 2: "4243"})
	assert.Equal(t, []string{"hpc_job"}, e.LabelNames(), "the label --hpc-job-mapping-dir writes")
	gpu := source.NewGPU(2, "GPU-x", "", "")
	assert.Equal(t, []string{"4243"}, e.Values(&gpu))
	inst := source.NewGPU(0, "GPU-y", "", "")
	inst.Kind, inst.GPUInstanceID = source.GPUInstance, 1
	assert.Equal(t, []string{"4242"}, e.Values(&inst), "a job holding a GPU holds its instances")
	free := source.NewGPU(1, "GPU-z", "", "")
	assert.Nil(t, e.Values(&free), "no job, no label")
}
