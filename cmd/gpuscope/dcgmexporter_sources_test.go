package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source"
)

// TestBindUnbindWatchReachesTheSources: the watch and its interval, given
// as dcgm-exporter does (pkg/cmd/app.go: --enable-gpu-bind-unbind-watch,
// --gpu-bind-unbind-poll-interval, DCGM_EXPORTER_ENABLE_GPU_BIND_UNBIND_WATCH),
// end up in the poll interval the DCGM, NVML and sim sources are opened with.
func TestBindUnbindWatchReachesTheSources(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want time.Duration
	}{
		{"off by default", nil, nil, 0},
		{"an interval alone turns nothing on", []string{"--gpu-bind-unbind-poll-interval", "5s"}, nil, 0},
		{"on with dcgm-exporter's default interval", []string{"--enable-gpu-bind-unbind-watch"}, nil, time.Second},
		{"on with an interval", []string{"--enable-gpu-bind-unbind-watch", "--gpu-bind-unbind-poll-interval", "250ms"}, nil, 250 * time.Millisecond},
		{"on through dcgm-exporter's variables", nil, map[string]string{
			"DCGM_EXPORTER_ENABLE_GPU_BIND_UNBIND_WATCH": "true", "DCGM_EXPORTER_GPU_BIND_UNBIND_POLL_INTERVAL": "2s"}, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			p, err := parseArgs(t, tt.args...)
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.cfg.Collection.BindUnbindPoll)
			assert.Equal(t, tt.want, dcgmConfig(p.cfg, logrus.NewEntry(logrus.New())).BindUnbindPoll)
		})
	}
}

// TestCPUDevicesSelectCPUs: -p reaches the entity selection, with
// dcgm-exporter's meaning (internal/pkg/deviceinfo/device_info.go,
// IsCPUWatched and IsCoreWatched): g:1 keeps CPU 1 and none of its cores.
func TestCPUDevicesSelectCPUs(t *testing.T) {
	gpu := source.NewGPU(0, "GPU-0", "0000:01:00.0", "GH200")
	cpu0, cpu1, core10 := source.NewCPU(0, -1), source.NewCPU(1, -1), source.NewCPU(1, 0)
	list := []*source.Entity{&gpu, &cpu0, &cpu1, &core10}
	tests := []struct {
		args []string
		want []*source.Entity
	}{
		{nil, list},
		{[]string{"-p", "g:1"}, []*source.Entity{&gpu, &cpu1}},
		{[]string{"--cpu-devices", "g:1", "-d", "g"}, []*source.Entity{&gpu, &cpu1}},
		{[]string{"-p", "i"}, []*source.Entity{&gpu}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			p, err := parseArgs(t, tt.args...)
			require.NoError(t, err)
			sel := selectEntities(p.cfg.Collection.Devices, logrus.NewEntry(logrus.New()))
			if tt.args == nil {
				assert.Nil(t, sel, "the defaults select nothing away")
				return
			}
			require.NotNil(t, sel)
			assert.Equal(t, tt.want, sel(list))
		})
	}
}

// TestDCGMListsProcessesWhenPodsNeedThem: the DCGM source lists GPU
// processes (through NVML beside it) exactly when pod attribution needs
// them, so per-pod memory and SM share of shared GPUs work on DCGM too;
// otherwise it never opens NVML.
func TestDCGMListsProcessesWhenPodsNeedThem(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--kubernetes"}, false},
		{[]string{"--kubernetes", "--kubernetes-shared-gpu-attribution"}, true},
		{[]string{"--kubernetes", "--kubernetes-virtual-gpus"}, true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			p, err := parseArgs(t, tt.args...)
			require.NoError(t, err)
			got := dcgmConfig(p.cfg, logrus.NewEntry(logrus.New())).Processes.Open != nil
			assert.Equal(t, tt.want, got)
		})
	}
}
