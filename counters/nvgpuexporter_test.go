package counters

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNvidiaGPUExporterNamesParse(t *testing.T) {
	tests := []struct {
		name    string
		csv     string
		want    Export
		layout  Layout
		wantErr string
	}{
		{name: "scaled value", csv: "nvidia_smi_memory_used_bytes, gauge, memory.used [MiB]\n",
			want: Export{Scale: 1 << 20}, layout: LayoutNvidiaGPUExporter},
		{name: "one bit of the mask", csv: "nvidia_smi_clocks_event_reasons_hw_thermal_slowdown, gauge, x\n",
			want: Export{Bit: 0x40}, layout: LayoutNvidiaGPUExporter},
		{name: "role", csv: "nvidia_smi_gpu_info, gauge, x\n", want: Export{Role: RoleInfo}, layout: LayoutNvidiaGPUExporter},
		{name: "info label", csv: "cuda_version, label, x\n", want: Export{Format: FormatCUDAVersion}, layout: LayoutNvidiaGPUExporter},
		{name: "dcgm-exporter file keeps its layout", csv: "DCGM_FI_DEV_GPU_UTIL, gauge, x\n", layout: LayoutDCGMExporter},
		{name: "type differs from the exporter's", csv: "nvidia_smi_xid_errors_total, gauge, x\n",
			wantErr: "f.csv:1: nvidia_smi_xid_errors_total is a counter in nvidia_gpu_exporter; write counter, not gauge"},
		{name: "role takes no interval", csv: "nvidia_smi_index, gauge, x, 1s\n",
			wantErr: "f.csv:1: nvidia_smi_index reads no GPU field: it takes no watch interval or window statistics"},
		{name: "typo is suggested", csv: "nvidia_smi_temperature_gpuu, gauge, x\n", wantErr: `unknown field "nvidia_smi_temperature_gpuu"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Parse("f.csv", strings.NewReader(tt.csv))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, set.Fields[0].Export)
			assert.Equal(t, tt.layout, set.Layout)
		})
	}
}

func TestExportValue(t *testing.T) {
	tests := []struct {
		x    Export
		v    float64
		want float64
	}{
		{Export{}, 42, 42},
		{Export{Scale: 0.01}, 87, 0.87},
		{Export{Scale: 1e-3}, 2500, 2.5},
		{Export{Bit: 0x40}, 0x41, 1},
		{Export{Bit: 0x40}, 0x3f, 0},
		// nvidia_gpu_exporter numbers compute modes and fabric states as
		// NVML does (utkuozdemir/nvidia_gpu_exporter commit e656cd8,
		// internal/nvidiasmi/transform.go); DCGM drops NVML's
		// exclusive-thread mode and folds a training that completed with
		// an error into its failure status (4).
		{Export{Enum: EnumComputeMode}, 0, 0},
		{Export{Enum: EnumComputeMode}, 1, 2},
		{Export{Enum: EnumComputeMode}, 2, 3},
		{Export{Enum: EnumFabricState}, 2, 2},
		{Export{Enum: EnumFabricState}, 3, 3},
		{Export{Enum: EnumFabricState}, 4, 3},
	}
	for _, tt := range tests {
		assert.InDelta(t, tt.want, tt.x.Value(tt.v), 1e-12, "%+v of %g", tt.x, tt.v)
	}
}

func TestLabelFormat(t *testing.T) {
	tests := []struct {
		f        LabelFormat
		in, want string
	}{
		{FormatCUDAVersion, "12080", "12.8"},
		{FormatCUDAVersion, "11040", "11.4"},
		{FormatComputeCap, "589824", "9.0"},
		{FormatComputeCap, "524297", "8.9"},
		{FormatComputeCap, "9.0", "9.0"},
		{FormatAsIs, "12080", "12080"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.f.Format(tt.in))
	}
}

// Every name of the table reads a field the catalog knows, and the shipped
// file lists every name of the table.
func TestShippedFileListsEveryName(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	set, err := Load(filepath.Join(filepath.Dir(file), "..", "etc", "nvidia-gpu-exporter.csv"))
	require.NoError(t, err)
	assert.Equal(t, LayoutNvidiaGPUExporter, set.Layout)
	listed := map[string]bool{}
	for _, f := range set.Fields {
		listed[f.Name] = true
	}
	for _, c := range NvidiaGPUExporterNames() {
		assert.True(t, listed[c.Name], "%s is not in etc/nvidia-gpu-exporter.csv", c.Name)
		if c.Field != "" {
			_, ok := Lookup(c.Field)
			assert.True(t, ok, "%s reads unknown field %s", c.Name, c.Field)
		}
	}
}
