package dump

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, name := range list(t, dir) {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		n += fi.Size()
	}
	return n
}

// TestDumpsBoundedByBytes: past MaxBytes the oldest dumps go, whatever the
// count allows, and the newest is always kept.
func TestDumpsBoundedByBytes(t *testing.T) {
	tests := []struct {
		name      string
		maxBytes  int64
		wantFiles int
	}{
		{"three fit", 350 << 10, 3},
		{"one larger than the bound stays alone", 10 << 10, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			body := strings.Repeat("x", 100<<10)
			d, err := New(Config{Dir: dir, MaxFiles: 1440, MaxBytes: tt.maxBytes, Now: clk.now}, func() any { return body })
			require.NoError(t, err)
			var last string
			for range 10 {
				clk.t = clk.t.Add(time.Minute)
				last, err = d.Once()
				require.NoError(t, err)
			}
			files := list(t, dir)
			assert.Len(t, files, tt.wantFiles)
			assert.Contains(t, files, filepath.Base(last), "the newest dump stays")
			if tt.wantFiles > 1 {
				assert.LessOrEqual(t, dirBytes(t, dir), tt.maxBytes)
			}
		})
	}
}

// TestDumpsBoundedByBytesByDefault: a configuration that gives no byte
// bound gets one.
func TestDumpsBoundedByBytesByDefault(t *testing.T) {
	d, err := New(Config{Dir: t.TempDir()}, func() any { return nil })
	require.NoError(t, err)
	assert.Equal(t, int64(DefaultMaxBytes), d.cfg.MaxBytes)
}
