package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMigrateCommand(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "old.csv", "# mine\nDCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_SM_CLOCK, gauge, c\n")
	out := filepath.Join(dir, "new.csv")

	tests := []struct {
		name, to, output string
		wantOut, wantErr string
		wantStderr       []string
	}{
		{name: "to new, on stdout", to: "new",
			wantOut: "# mine\nDCGM_FI_DEV_GPU_TEMP_CELSIUS, gauge, t\nDCGM_FI_DEV_SM_CLOCK_HERTZ, gauge, c\n",
			wantStderr: []string{
				in + ":3: DCGM_FI_DEV_SM_CLOCK (MHz) -> DCGM_FI_DEV_SM_CLOCK_HERTZ (Hz): another field, values times 1e+06\n",
				in + ": 2 fields renamed to the new vocabulary, 1 of them into another unit\n",
			}},
		{name: "to a file", to: "new", output: out,
			wantStderr: []string{in + ": 2 fields renamed to the new vocabulary, 1 of them into another unit\n"}},
		{name: "unknown vocabulary", to: "4.9", wantErr: `counters migrate: --to: unknown vocabulary "4.9" (want new or legacy)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := migrateCounters(&stdout, &stderr, in, tt.to, tt.output)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantOut, stdout.String())
			for _, s := range tt.wantStderr {
				assert.Contains(t, stderr.String(), s)
			}
			if tt.output != "" {
				b, err := os.ReadFile(tt.output)
				require.NoError(t, err)
				assert.Contains(t, string(b), "DCGM_FI_DEV_SM_CLOCK_HERTZ, gauge, c\n")
			}
		})
	}
	err := migrateCounters(&bytes.Buffer{}, &bytes.Buffer{}, filepath.Join(dir, "missing.csv"), "new", "")
	assert.ErrorContains(t, err, "missing.csv: no such file or directory")
}
