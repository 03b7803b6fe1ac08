package fieldid

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dcgmFieldsH reads pkg/dcgm/dcgm_fields.h of the go-dcgm in go.mod
// (v1.4611.0, DCGM 4.6.1): the header every expectation below comes from.
func dcgmFieldsH(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-dcgm").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("go-dcgm module source not available: %v", err)
		}
		t.Skipf("go-dcgm module source not available: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "pkg", "dcgm", "dcgm_fields.h"))
	require.NoError(t, err)
	return string(b)
}

func TestEveryDeprecatedAliasOfTheHeaderResolves(t *testing.T) {
	h := dcgmFieldsH(t)
	block := h[strings.Index(h, "#if DCGM_DEPRECATED"):]
	aliases := regexp.MustCompile(`(?m)^#define\s+(DCGM_FI_\w+)\s+(DCGM_FI_\w+)`).FindAllStringSubmatch(block, -1)
	require.Greater(t, len(aliases), 350, "the DCGM_DEPRECATED block of dcgm_fields.h")
	ids := map[string]uint16{}
	for _, e := range Current() {
		ids[e.Name] = e.ID
	}
	byName := map[string]Alias{}
	for _, a := range Deprecated() {
		byName[a.Name] = a
	}
	for _, m := range aliases {
		a, ok := byName[m[1]]
		if !assert.True(t, ok, "%s is not a deprecated name", m[1]) {
			continue
		}
		assert.Equal(t, m[2], a.Current, m[1])
		assert.Equal(t, ids[m[2]], a.ID, "%s has the ID of %s", m[1], m[2])
	}
	// The old Go constants keep their values under the new names.
	assert.Equal(t, GPUTempCelsius, GPUTemp)
	assert.Equal(t, XIDError, XIDErrors)
	assert.Equal(t, SystemDriverVersion, DriverVersion)
	assert.Equal(t, ProfSMUtilRatio, ProfSMActive)
	assert.Equal(t, BoardPowerWatts, PowerUsage)
}

func TestBaseUnitTableMatchesTheHeader(t *testing.T) {
	h := dcgmFieldsH(t)
	want := []struct {
		name, unit, legacy string
		scale              float64
	}{
		{"DCGM_FI_DEV_BAR1_CAPACITY_BYTES", "B", "DCGM_FI_DEV_BAR1_TOTAL", 1 << 20},
		{"DCGM_FI_DEV_BAR1_USED_BYTES", "B", "DCGM_FI_DEV_BAR1_USED", 1 << 20},
		{"DCGM_FI_DEV_BAR1_FREE_BYTES", "B", "DCGM_FI_DEV_BAR1_FREE", 1 << 20},
		{"DCGM_FI_DEV_SM_CLOCK_HERTZ", "Hz", "DCGM_FI_DEV_SM_CLOCK", 1e6},
		{"DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "Hz", "DCGM_FI_DEV_MEM_CLOCK", 1e6},
		{"DCGM_FI_DEV_VIDEO_CLOCK_HERTZ", "Hz", "DCGM_FI_DEV_VIDEO_CLOCK", 1e6},
		{"DCGM_FI_DEV_SM_APP_CLOCK_HERTZ", "Hz", "DCGM_FI_DEV_APP_SM_CLOCK", 1e6},
		{"DCGM_FI_DEV_MEMORY_APP_CLOCK_HERTZ", "Hz", "DCGM_FI_DEV_APP_MEM_CLOCK", 1e6},
		{"DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ", "Hz", "DCGM_FI_DEV_MAX_SM_CLOCK", 1e6},
		{"DCGM_FI_DEV_MEMORY_MAX_CLOCK_HERTZ", "Hz", "DCGM_FI_DEV_MAX_MEM_CLOCK", 1e6},
		{"DCGM_FI_DEV_VIDEO_MAX_CLOCK_HERTZ", "Hz", "DCGM_FI_DEV_MAX_VIDEO_CLOCK", 1e6},
		{"DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", "J", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3},
		{"DCGM_FI_DEV_FAN_SPEED_RATIO", "ratio", "DCGM_FI_DEV_FAN_SPEED", 1e-2},
	}
	got := BaseUnits()
	require.Len(t, got, len(want))
	for i, w := range want {
		u := got[i]
		t.Run(w.name, func(t *testing.T) {
			assert.Equal(t, w.name, u.Name)
			assert.Equal(t, w.unit, u.Unit)
			assert.Equal(t, w.legacy, u.LegacyName)
			assert.InDelta(t, w.scale, u.Scale, w.scale*1e-12)
			assert.Equal(t, strconv.Itoa(int(u.ID)), defineOf(t, h, w.name), "ID of %s in dcgm_fields.h", w.name)
			assert.Equal(t, strconv.Itoa(int(u.Legacy)), defineOf(t, h, w.legacy), "ID of %s in dcgm_fields.h", w.legacy)
			assert.GreaterOrEqual(t, u.ID, uint16(1600), "a new ID, in the 1600 range")
			// The legacy field's comment points at the new one.
			assert.Regexp(t, `Deprecated: Use `+w.name+` instead\.\s*\*/\s*#define `+w.legacy+` `, h)
			assert.Equal(t, w.unit, Of(u.ID).Unit)
			assert.Equal(t, Of(u.Legacy).Level, Of(u.ID).Level, "read where the legacy field is")
			s, ok := SupersededBy(u.Legacy)
			assert.True(t, ok)
			assert.Equal(t, u, s)
		})
	}
}

func defineOf(t *testing.T, h, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^#define\s+` + name + `\s+(\d+)`).FindStringSubmatch(h)
	if m == nil {
		t.Fatalf("%s has no numeric define in dcgm_fields.h", name)
	}
	return m[1]
}
