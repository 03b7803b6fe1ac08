package dump

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func list(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func read(t *testing.T, path string) map[string]any {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		require.NoError(t, err)
		r = gz
	}
	var v map[string]any
	require.NoError(t, json.NewDecoder(r).Decode(&v))
	return v
}

func TestDumpsAreJSONAndCompressedWhenAsked(t *testing.T) {
	for _, compress := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "dumps")
		c := &clock{time.Date(2026, 11, 30, 21, 0, 0, 0, time.UTC)}
		d, err := New(Config{Dir: dir, Compress: compress, Now: c.now}, func() any {
			return map[string]any{"exposition": "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 40\n"}
		})
		require.NoError(t, err)
		path, err := d.Once()
		require.NoError(t, err)
		assert.Equal(t, compress, strings.HasSuffix(path, ".json.gz"))
		assert.Equal(t, !compress, strings.HasSuffix(path, ".json"))
		assert.Equal(t, "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 40\n", read(t, path)["exposition"])
	}
}

func TestRetentionAndCountBoundTheDumps(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "keep-me.txt")
	require.NoError(t, os.WriteFile(other, []byte("x"), 0o600))
	c := &clock{time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}
	d, err := New(Config{Dir: dir, Retention: 2 * time.Hour, MaxFiles: 3, Now: c.now}, func() any { return 1 })
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		_, err := d.Once()
		require.NoError(t, err)
		c.t = c.t.Add(30 * time.Minute)
	}
	files := list(t, dir)
	assert.Len(t, files, 4, "three dumps (the count bound) and the foreign file: %v", files)
	assert.Contains(t, files, "keep-me.txt", "only dumps are removed")
	// Three hours on, every dump is past the two-hour retention but the new one.
	c.t = c.t.Add(3 * time.Hour)
	_, err = d.Once()
	require.NoError(t, err)
	files = list(t, dir)
	assert.Len(t, files, 2, "%v", files)
}

func TestNewNeedsADirectory(t *testing.T) {
	_, err := New(Config{}, func() any { return nil })
	require.Error(t, err)
	blocked := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocked, nil, 0o600))
	_, err = New(Config{Dir: filepath.Join(blocked, "sub")}, func() any { return nil })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dump directory")
}
