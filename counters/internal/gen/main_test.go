package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const fixture = `package dcgm

type Short uint16

var dcgmFields = map[string]Short{
	"DCGM_FI_DRIVER_VERSION": 1,
	"DCGM_FI_DEV_SM_CLOCK": 0x64,
}

var legacyDCGMFields = map[string]Short{
	"dcgm_sm_clock": 100,
}
`

func TestRunWritesSortedTables(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "const_fields.go")
	out := filepath.Join(dir, "fields_gen.go")
	require.NoError(t, os.WriteFile(src, []byte(fixture), 0o644))
	require.NoError(t, run(src, out))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(got), "var dcgmFieldIDs = []fieldID{\n\t{\"DCGM_FI_DEV_SM_CLOCK\", 100},\n\t{\"DCGM_FI_DRIVER_VERSION\", 1},\n}\n")
	assert.Contains(t, string(got), "var legacyFieldIDs = []fieldID{\n\t{\"dcgm_sm_clock\", 100},\n}\n")
}

func TestParseMapsErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"missing map", "package dcgm\nvar dcgmFields = map[string]int{\"A\": 1}\n", "map legacyDCGMFields not found or empty"},
		{"not an integer", "package dcgm\nvar dcgmFields = map[string]int{\"A\": x}\nvar legacyDCGMFields = map[string]int{\"a\": 1}\n", "value is not an integer literal"},
		{"out of range", "package dcgm\nvar dcgmFields = map[string]int{\"A\": 70000}\nvar legacyDCGMFields = map[string]int{\"a\": 1}\n", "field ID 70000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "c.go")
			require.NoError(t, os.WriteFile(src, []byte(tt.src), 0o644))
			_, err := parseMaps(src, "dcgmFields", "legacyDCGMFields")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
