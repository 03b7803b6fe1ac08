package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// TestBothVocabulariesThroughTheBinary: the new-style counters file
// checks clean and serves on the sim, beside the old names, each in its own
// unit. Names and units from go-dcgm v1.4611.0's pkg/dcgm/dcgm_fields.h:
// DCGM_FI_DEV_SM_CLOCK (100, MHz), DCGM_FI_DEV_SM_CLOCK_HERTZ (1603, Hz),
// DCGM_FI_DEV_GPU_TEMP_CELSIUS (150; DCGM_FI_DEV_GPU_TEMP before 4.6),
// DCGM_FI_SYSTEM_DRIVER_VERSION (1; DCGM_FI_DRIVER_VERSION before 4.6).
func TestBothVocabulariesThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	newFile := filepath.Join(dir, "new.csv")
	require.NoError(t, os.WriteFile(newFile, []byte("DCGM_FI_DEV_GPU_TEMP_CELSIUS, gauge, temp\nDCGM_FI_DEV_SM_CLOCK_HERTZ, gauge, clk\n"), 0o644))
	mixed := filepath.Join(dir, "mixed.csv")
	require.NoError(t, os.WriteFile(mixed, []byte("DCGM_FI_DEV_SM_CLOCK, gauge, clk\nDCGM_FI_DEV_SM_CLOCK_HERTZ, gauge, clk\n"+
		"DCGM_FI_DEV_GPU_TEMP_CELSIUS, gauge, temp\nDCGM_FI_SYSTEM_DRIVER_VERSION, label, driver\n"), 0o644))

	bin := e2etest.Binary(t) // built before the command's clock starts
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	check := exec.CommandContext(ctx, bin, "counters", "check", newFile)
	check.Stdout, check.Stderr = &out, &out
	require.NoError(t, check.Run(), out.String())
	assert.Equal(t, newFile+": ok (2 fields)\n", out.String())

	base, _ := e2etest.GPUScope(t, "--source", "sim", "--collectors", mixed)
	mfs := scrapeUntil(t, base, "DCGM_FI_DEV_SM_CLOCK_HERTZ", 30*time.Second)
	for _, fam := range []string{"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"} {
		require.Contains(t, mfs, fam)
	}
	assert.NotContains(t, mfs, "DCGM_FI_DEV_GPU_TEMP", "exported under the name the file gives")
	mhz := map[string]float64{}
	for _, m := range mfs["DCGM_FI_DEV_SM_CLOCK"].Metric {
		mhz[label(m, "UUID")+"/"+label(m, "GPU_I_ID")] = m.GetGauge().GetValue()
	}
	require.NotEmpty(t, mfs["DCGM_FI_DEV_SM_CLOCK_HERTZ"].Metric)
	for _, m := range mfs["DCGM_FI_DEV_SM_CLOCK_HERTZ"].Metric {
		k := label(m, "UUID") + "/" + label(m, "GPU_I_ID")
		assert.Equal(t, mhz[k]*1e6, m.GetGauge().GetValue(), "%s: the same clock reading, in hertz", k)
		assert.NotEmpty(t, label(m, "DCGM_FI_SYSTEM_DRIVER_VERSION"), "the driver version label is named as the file names the field")
		assert.Empty(t, label(m, "DCGM_FI_DRIVER_VERSION"))
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
