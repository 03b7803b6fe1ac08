package hpcjob

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source"
)

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}

func gpu(idx int) *source.Entity {
	e := source.NewGPU(idx, "GPU-00000000-0000-4000-8000-00000000000"+string(rune('0'+idx)), "", "")
	return &e
}

func mig(idx, gi int) *source.Entity {
	e := gpu(idx)
	e.Kind, e.GPUInstanceID = source.GPUInstance, gi
	return e
}

func TestValues(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "0", "4711\n")
	write(t, dir, "1", "\n  8001 \n8002\n\n")
	write(t, dir, "2.3", "9001\n")
	write(t, dir, "2", "9000\n")
	write(t, dir, "3", "")
	write(t, dir, "README", "not a GPU file\n")
	logger, _ := logtest.NewNullLogger()
	e, err := New(dir, WithLogger(logger))
	require.NoError(t, err)
	require.NoError(t, e.Refresh())

	tests := []struct {
		name string
		ent  *source.Entity
		want []string
	}{
		{"one job", gpu(0), []string{"4711"}},
		{"two jobs: the first", gpu(1), []string{"8001"}},
		{"MIG instance with its own file", mig(2, 3), []string{"9001"}},
		{"MIG instance falls back to its GPU", mig(2, 5), []string{"9000"}},
		{"empty file", gpu(3), nil},
		{"no file", gpu(4), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, e.Values(tt.ent))
		})
	}
	// dcgm-exporter (internal/pkg/transformation/hpc.go) copies a GPU's
	// metrics once per job in its file.
	assert.Equal(t, [][]string{{"8001"}, {"8002"}}, e.ValueRows(gpu(1)), "one row per job, in file order")
	assert.Nil(t, e.ValueRows(gpu(0)), "one job needs no rows")
	assert.Equal(t, []string{"hpc_job"}, e.LabelNames())
	require.NoError(t, testutil.CollectAndCompare(e, strings.NewReader(`
# HELP gpuscope_hpc_job_mapping_files GPU or MIG instance files with at least one job in the mapping directory.
# TYPE gpuscope_hpc_job_mapping_files gauge
gpuscope_hpc_job_mapping_files 4
# HELP gpuscope_hpc_job_mapping_up 1 while the HPC job mapping directory can be read within the read timeout; 0 when it cannot and series go without hpc_job.
# TYPE gpuscope_hpc_job_mapping_up gauge
gpuscope_hpc_job_mapping_up 1
`), "gpuscope_hpc_job_mapping_files", "gpuscope_hpc_job_mapping_up"))
}

func TestRefreshTracksChanges(t *testing.T) {
	dir := t.TempDir()
	logger, _ := logtest.NewNullLogger()
	e, err := New(dir, WithLogger(logger), WithInterval(100*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()

	gen := e.Generation()
	write(t, dir, "0", "job-a\n")
	require.Eventually(t, func() bool { return len(e.Values(gpu(0))) == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, []string{"job-a"}, e.Values(gpu(0)))
	assert.NotEqual(t, gen, e.Generation())

	require.NoError(t, os.Remove(filepath.Join(dir, "0")))
	require.Eventually(t, func() bool { return e.Values(gpu(0)) == nil }, 5*time.Second, 20*time.Millisecond, "the epilog removed the file")
	cancel()
	require.NoError(t, <-done)
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "0", "ok\n")
	write(t, dir, "1", "has space\n")
	var many strings.Builder
	for i := range maxJobsPerFile + 1 {
		fmt.Fprintf(&many, "%d\n", 9000+i)
	}
	write(t, dir, "2", many.String())
	logger, hook := logtest.NewNullLogger()
	e, err := New(dir, WithLogger(logger))
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, e.Refresh())
	}
	assert.Equal(t, []string{"ok"}, e.Values(gpu(0)))
	assert.Nil(t, e.Values(gpu(1)))
	assert.Nil(t, e.Values(gpu(2)))
	assert.Equal(t, 6.0, testutil.ToFloat64(e.errors), "two bad files over three refreshes")
	var msgs []string
	for _, en := range hook.AllEntries() {
		msgs = append(msgs, en.Data["error"].(error).Error())
	}
	require.Len(t, msgs, 2, "each bad file is logged once")
	joined := strings.Join(msgs, "\n")
	assert.Contains(t, joined, filepath.Join(dir, "1")+":1:")
	assert.Contains(t, joined, filepath.Join(dir, "2")+":65:")
}

func TestMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jobs")
	logger, _ := logtest.NewNullLogger()
	e, err := New(dir, WithLogger(logger))
	require.NoError(t, err)
	err = e.Refresh()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "job mapping directory "+dir)
	assert.Nil(t, e.Values(gpu(0)))

	require.NoError(t, os.Mkdir(dir, 0o755))
	write(t, dir, "0", "42\n")
	require.NoError(t, e.Refresh())
	assert.Equal(t, []string{"42"}, e.Values(gpu(0)))

	_, err = New("")
	require.Error(t, err)
}
