package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// efficiencyAnswers is an hour of three devices: GPU 0 an H100 held the
// whole hour at OFU 0.5, busy; GPU 1 an A100 held half of it at OFU 0.2,
// idle; GPU 2 a MIG instance of an H100 held the hour, with no tensor
// activity field. prices answers the recorded price series.
func efficiencyAnswers(prices string) [][2]string {
	const (
		d0 = `{"Hostname":"n1","gpu":"0","UUID":"GPU-0"}`
		d1 = `{"Hostname":"n1","gpu":"1","UUID":"GPU-1"}`
		d2 = `{"Hostname":"n1","gpu":"2","UUID":"GPU-2","GPU_I_ID":"1"}`
	)
	vec := func(pairs ...string) string {
		var parts []string
		for i := 0; i < len(pairs); i += 2 {
			parts = append(parts, `{"metric":`+pairs[i]+`,"value":[1750003600,"`+pairs[i+1]+`"]}`)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	withModel := func(d, model string) string { return strings.TrimSuffix(d, "}") + `,"modelName":"` + model + `"}` }
	return [][2]string{
		{priceRecord, prices},
		{"GPU_I_ID,modelName)", vec(withModel(d0, "H100"), "1", withModel(d1, "A100"), "1", withModel(d2, "H100"), "1")},
		// 2 s steps (DefaultResolution of an hour): 1800 is the hour.
		{"count_over_time((count by", vec(d0, "1800", d1, "900", d2, "1800")},
		{"count by (cluster", vec(d0, "360", d1, "180", d2, "360")},
		{"clamp_max(", vec(d0, "0.5", d1, "0.2")},
		{"max_over_time(" + activityRecord, vec(d0, "0.9", d1, "0", d2, "0.5")},
	}
}

// OFU is each device's, weighted by the time it was held; cost is the
// GPU-hours of the whole GPUs times their model's recorded price, with the
// part on GPUs idle throughout, and the MIG instance left out.
func TestReportOFUAndCost(t *testing.T) {
	h := &hostileProm{answers: efficiencyAnswers(`[{"metric":{"modelName":"H100"},"value":[1750003600,"6"]},{"metric":{"modelName":"A100"},"value":[1750003600,"2"]}]`)}
	s, err := buildAgainst(t, h, Options{})
	require.NoError(t, err)
	require.NotNil(t, s.OFU)
	assert.InDelta(t, (1*0.5+0.5*0.2)/1.5, *s.OFU, 1e-4, "1 h at 0.5 and 0.5 h at 0.2")
	require.NotNil(t, s.Cost)
	assert.InDelta(t, 1*6+0.5*2, *s.Cost, 1e-4, "an H100-hour at 6, half an A100-hour at 2")
	require.NotNil(t, s.CostIdle)
	assert.InDelta(t, 1.0, *s.CostIdle, 1e-4, "the idle A100's half hour")
	assert.Equal(t, 1, s.CostExcluded, "the MIG instance")

	var js, tbl strings.Builder
	require.NoError(t, s.WriteJSON(&js))
	assert.Contains(t, js.String(), `"ofu":0.4,"cost":7,"cost_idle":1,"cost_excl":1`)
	require.NoError(t, s.WriteTable(&tbl))
	assert.Contains(t, tbl.String(), "40.0% of peak tensor throughput")
	assert.Contains(t, tbl.String(), "7.00 (GPU-hours x price per GPU-hour of the model); 1.00 of it on GPUs idle throughout; 1 MIG instances or GPUs without a price left out")

	// The OFU query reads the window means and the plain gauge, in either
	// vocabulary, and the maximum clock field before the highest clock
	// (grafana/dash/vocabulary.tsv: the clocks' base-unit names are in Hz).
	var q string
	for _, x := range h.queries {
		if strings.Contains(x, "clamp_max(") {
			q = x
		}
	}
	for _, want := range []string{
		`DCGM_FI_PROF_PIPE_TENSOR_ACTIVE_window{hpc_job="42",GPU_CI_ID="",stat="avg"}`,
		`DCGM_FI_PROF_TENSOR_UTIL_RATIO_window{`,
		`avg_over_time(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{`,
		`avg_over_time(DCGM_FI_DEV_SM_CLOCK_HERTZ{hpc_job="42",GPU_CI_ID=""}[3600000ms]) / 1000000`,
		`max_over_time(DCGM_FI_DEV_MAX_SM_CLOCK{`,
		`max_over_time(DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ{hpc_job="42",GPU_CI_ID=""}[3600000ms]) / 1000000`,
	} {
		assert.Contains(t, q, want)
	}
	assert.Less(t, strings.Index(q, maxSMClock), strings.LastIndex(q, "max_over_time("+smClock+"{"), "the maximum clock field first")
}

// Without a recorded price there is no cost, and the table says where a
// price comes from; without tensor activity there is no OFU.
func TestReportWithoutPriceOrTensorActivity(t *testing.T) {
	answers := efficiencyAnswers("[]")
	for i := range answers {
		if answers[i][0] == "clamp_max(" {
			answers[i][1] = "[]" // no OFU
		}
	}
	s, err := buildAgainst(t, &hostileProm{answers: answers}, Options{})
	require.NoError(t, err)
	assert.Nil(t, s.Cost)
	assert.Nil(t, s.CostIdle)
	assert.Zero(t, s.CostExcluded)
	assert.Nil(t, s.OFU)
	var js, tbl strings.Builder
	require.NoError(t, s.WriteJSON(&js))
	assert.NotContains(t, js.String(), "cost")
	assert.NotContains(t, js.String(), "ofu")
	require.NoError(t, s.WriteTable(&tbl))
	assert.Contains(t, tbl.String(), "n/a (no price per GPU-hour recorded: the chart value prometheusRule.pricePerGPUHour)")
	assert.Contains(t, tbl.String(), "OFU              n/a (no tensor activity or SM clock field")
}
