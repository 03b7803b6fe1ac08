package main

import (
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			assert.Equal(t, tt.want, bindUnbindPoll(p.c))
			assert.Equal(t, tt.want, dcgmConfig(p.c, logrus.NewEntry(logrus.New())).BindUnbindPoll)
		})
	}
}
