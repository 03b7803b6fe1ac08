package scenarios

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecordingKeepsWhatPrometheusWouldStore: the scrapes become promtool's
// input series as Prometheus would have stored them.
func TestRecordingKeepsWhatPrometheusWouldStore(t *testing.T) {
	keep := readBy(`sum(DCGM_FI_DEV_FB_USED) and rate(gpuscope_collection_duration_seconds_count[5m]) and gpuscope_field_supported`)
	r := &recording{steps: 3, series: map[string][]string{}, target: labelPairs(map[string]string{"job": "gpuscope", "instance": "n:9400"})}
	scrapes := []string{
		"# HELP DCGM_FI_DEV_FB_USED f\n# TYPE DCGM_FI_DEV_FB_USED gauge\n" +
			`DCGM_FI_DEV_FB_USED{gpu="0",modelName="NVIDIA H100 80GB HBM3"} 100` + "\n" +
			`DCGM_FI_DEV_GPU_TEMP{gpu="0"} 40` + "\n" +
			`gpuscope_collection_duration_seconds_bucket{interval="1s",le="+Inf"} 3` + "\n" +
			`gpuscope_collection_duration_seconds_count{interval="1s"} 3` + "\n" +
			`gpuscope_field_supported{field="X",reason="a } and a \" in it"} 0` + "\n",
		`DCGM_FI_DEV_FB_USED{gpu="0",modelName="NVIDIA H100 80GB HBM3"} 1.5e+10` + "\n",
		`DCGM_FI_DEV_FB_USED{gpu="0",modelName="NVIDIA H100 80GB HBM3"} +Inf` + "\n",
	}
	for i, s := range scrapes {
		require.NoError(t, r.add(i, []byte(s), keep))
	}
	fb := `DCGM_FI_DEV_FB_USED{gpu="0",modelName="NVIDIA H100 80GB HBM3"}`
	assert.Equal(t, "100 1.5e+10 Inf", values(r.series[fb]))
	assert.Equal(t, `DCGM_FI_DEV_FB_USED{instance="n:9400",job="gpuscope",gpu="0",modelName="NVIDIA H100 80GB HBM3"}`, r.promSeries(fb))
	assert.Equal(t, "3 stale _", values(r.series[`gpuscope_collection_duration_seconds_count{interval="1s"}`]),
		"a histogram's series are kept when a rule reads one of them; a series gone is marked stale once")
	assert.Contains(t, r.series, `gpuscope_field_supported{field="X",reason="a } and a \" in it"}`, "quoted braces and quotes stay in the value")
	assert.NotContains(t, r.series, `DCGM_FI_DEV_GPU_TEMP{gpu="0"}`, "no rule reads it")
	assert.Equal(t, `up{instance="n:9400",job="gpuscope"}`, r.promSeries("up"))

	for _, bad := range []string{`DCGM_FI_DEV_FB_USED{a="1" 2`, `DCGM_FI_DEV_FB_USED{a="1"}`, `DCGM_FI_DEV_FB_USED 1 1700000000000`, `DCGM_FI_DEV_FB_USED`} {
		assert.Error(t, r.add(0, []byte(bad), keep), bad)
	}
	assert.NoError(t, r.add(0, []byte(`DCGM_FI_DEV_GPU_TEMP{a="1" 2`), keep), "a family no rule reads is not parsed")
}
