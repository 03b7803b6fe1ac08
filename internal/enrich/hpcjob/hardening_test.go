package hpcjob

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upValue reads gpuscope_hpc_job_mapping_up as a scrape shows it.
func upValue(t *testing.T, e *Enricher) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(e))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "gpuscope_hpc_job_mapping_up" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no gpuscope_hpc_job_mapping_up")
	return 0
}

// TestHPCJobMappingSkipsFIFO: a FIFO (or any file that is not a regular
// file) in the directory is skipped and logged, where opening it blocked
// the refresher forever; the other files keep being read.
func TestHPCJobMappingSkipsFIFO(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "1"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "2"), 0o755))
	write(t, dir, "0", "job-a\n")
	logger, hook := logtest.NewNullLogger()
	e, err := New(dir, WithLogger(logger))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- e.Refresh() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the refresh blocks on the FIFO")
	}
	assert.Equal(t, []string{"job-a"}, e.Values(gpu(0)))
	assert.Nil(t, e.Values(gpu(1)))
	require.NotEmpty(t, hook.AllEntries())
	assert.Contains(t, fmt.Sprint(hook.AllEntries()[0].Data["error"]), "not a regular file")
}

// TestHPCJobMappingReadsEveryEntry: a directory of 10,000 files, most of
// them not GPU files, still maps every GPU file in it.
func TestHPCJobMappingReadsEveryEntry(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 10,000 files")
	}
	dir := t.TempDir()
	for i := range 10000 {
		write(t, dir, "stale-"+strconv.Itoa(i), "x\n")
	}
	for g := range 8 {
		write(t, dir, strconv.Itoa(g), "job-"+strconv.Itoa(g)+"\n")
	}
	logger, _ := logtest.NewNullLogger()
	e, err := New(dir, WithLogger(logger))
	require.NoError(t, err)
	require.NoError(t, e.Refresh())
	for g := range 8 {
		assert.Equal(t, []string{"job-" + strconv.Itoa(g)}, e.Values(gpu(g)), "GPU %d", g)
	}
}

// TestHPCJobMappingKeepsLastGoodWhileMidWrite: a file rewritten in place
// reads empty between its truncation and its write; while it was modified
// within the settle time, the last jobs read from it stay.
func TestHPCJobMappingKeepsLastGoodWhileMidWrite(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	write(t, dir, "0", "job-a\n")
	logger, _ := logtest.NewNullLogger()
	e, err := New(dir, WithLogger(logger))
	require.NoError(t, err)
	e.now = func() time.Time { return now }
	require.NoError(t, e.Refresh())
	require.Equal(t, []string{"job-a"}, e.Values(gpu(0)))

	path := filepath.Join(dir, "0")
	require.NoError(t, os.Truncate(path, 0))
	require.NoError(t, os.Chtimes(path, now, now))
	require.NoError(t, e.Refresh())
	assert.Equal(t, []string{"job-a"}, e.Values(gpu(0)), "mid-write: the last good jobs stay")

	// Still empty past the settle time: the epilog emptied it.
	now = now.Add(2 * settleTime)
	require.NoError(t, e.Refresh())
	assert.Nil(t, e.Values(gpu(0)))
}

// TestHPCJobMappingHungReadIsVisible: a read that hangs (a dead network
// mount) ends the refresh after the read timeout, sets
// gpuscope_hpc_job_mapping_up to 0, is logged, and does not start a
// second stuck read.
func TestHPCJobMappingHungReadIsVisible(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "0", "job-a\n")
	logger, hook := logtest.NewNullLogger()
	e, err := New(dir, WithLogger(logger), WithReadTimeout(100*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, e.Refresh())
	require.Equal(t, 1.0, upValue(t, e))

	release := make(chan struct{})
	opened := make(chan struct{}, 8)
	e.open = func(string) (io.ReadCloser, error) {
		opened <- struct{}{}
		<-release
		return nil, errors.New("released")
	}
	for range 3 {
		err := e.Refresh()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no answer")
	}
	assert.Equal(t, 0.0, upValue(t, e))
	assert.Nil(t, e.Values(gpu(0)), "labels the directory no longer confirms are cleared")
	assert.Len(t, opened, 1, "one read hangs at most")
	require.NotEmpty(t, hook.AllEntries())
	close(release)
}
