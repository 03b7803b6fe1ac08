package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAPIMaxStreamsNamesTheFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flag", []string{"--source", "sim", "--api-max-streams", "0"}, nil},
		{"variable", []string{"--source", "sim"}, map[string]string{"GPUSCOPE_API_MAX_STREAMS": "-3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := run(t, tt.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "--api-max-streams")
			assert.Contains(t, err.Error(), "allow at least 1 stream")
		})
	}
}
