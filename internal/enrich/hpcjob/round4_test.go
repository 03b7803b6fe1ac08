package hpcjob

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source"
)

func newQuiet(t *testing.T, dir string, opts ...Option) *Enricher {
	t.Helper()
	logger, _ := logtest.NewNullLogger()
	e, err := New(dir, append([]Option{WithLogger(logger)}, opts...)...)
	require.NoError(t, err)
	return e
}

// rowsOf is the hpc_job values a GPU's series carry, one per copy.
func rowsOf(e *Enricher, ent *source.Entity) []string {
	if rows := e.ValueRows(ent); rows != nil {
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = r[0]
		}
		return out
	}
	return e.Values(ent)
}

// replaceAtomically writes name through a temporary file and a rename, as
// a prolog that replaces its file whole does.
func replaceAtomically(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, ".tmp-"+name)
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, name)))
}

// TestHPCJobRound4SecondJobChangeRelabels (round 4, item 1): "jobA\njobB"
// replaced by "jobA\njobC" keeps the first job and the count; the series
// must still be relabelled (a new generation), jobC in, jobB out.
func TestHPCJobRound4SecondJobChangeRelabels(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "0", "jobA\njobB\n")
	e := newQuiet(t, dir)
	require.NoError(t, e.Refresh())
	require.Equal(t, []string{"jobA", "jobB"}, rowsOf(e, gpu(0)))
	gen := e.Generation()

	replaceAtomically(t, dir, "0", "jobA\njobC\n")
	require.NoError(t, e.Refresh())
	assert.Equal(t, []string{"jobA", "jobC"}, rowsOf(e, gpu(0)))
	assert.Greater(t, e.Generation(), gen, "the engine relabels only on a new generation")
}

// TestHPCJobRound4RefusesLinks (round 4, item 2): entries that are links
// are refused, whether they point out of the directory (a secret file,
// /proc/self/cmdline) or at another entry; a regular file beside them is
// still read.
func TestHPCJobRound4RefusesLinks(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "shadow")
	require.NoError(t, os.WriteFile(outside, []byte("root:$6$salt$hash\n"), 0o600))
	write(t, dir, "1", "job-ok\n")
	tests := []struct {
		name, entry, target string
		hard                bool
	}{
		{"symlink to a private file outside", "0", outside, false},
		{"symlink to /proc/self/cmdline", "5", "/proc/self/cmdline", false},
		{"symlink inside the directory", "2", filepath.Join(dir, "1"), false},
		{"hard link to a private file", "3", outside, true},
	}
	for _, tt := range tests {
		if tt.hard {
			if err := os.Link(tt.target, filepath.Join(dir, tt.entry)); err != nil {
				t.Logf("%s: cannot make a hard link here: %v", tt.name, err)
				continue
			}
		} else {
			require.NoError(t, os.Symlink(tt.target, filepath.Join(dir, tt.entry)))
		}
	}
	logger, hook := logtest.NewNullLogger()
	e, err := New(dir, WithLogger(logger))
	require.NoError(t, err)
	require.NoError(t, e.Refresh())
	for _, tt := range tests {
		idx, _ := strconv.Atoi(tt.entry)
		assert.Nil(t, e.Values(gpu(idx)), tt.name)
	}
	assert.Equal(t, []string{"job-ok"}, e.Values(gpu(1)))
	var logged strings.Builder
	for _, en := range hook.AllEntries() {
		logged.WriteString(strings.ToLower(errString(en.Data["error"])))
	}
	assert.Contains(t, logged.String(), "link", "the refusal says why")
}

func errString(v any) string {
	if err, ok := v.(error); ok {
		return err.Error()
	}
	return ""
}

// TestHPCJobRound4DuplicateJobsOnce (round 4, item 3): a job listed twice
// in a file gives one copy of each series, not two identical ones.
func TestHPCJobRound4DuplicateJobsOnce(t *testing.T) {
	tests := []struct {
		name, content string
		want          []string
	}{
		{"same job twice", "jobA\njobA\n", []string{"jobA"}},
		{"twice around another", "jobA\njobB\njobA\n", []string{"jobA", "jobB"}},
		{"twice with spaces", " jobA\njobA \n", []string{"jobA"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "0", tt.content)
			e := newQuiet(t, dir)
			require.NoError(t, e.Refresh())
			assert.Equal(t, tt.want, rowsOf(e, gpu(0)))
		})
	}
}

// TestHPCJobRound4RefusesControlCharacters (round 4, item 4): a job ID
// holding a control character or invalid UTF-8 is refused with the file
// and line, never written into hpc_job; the file's other GPUs keep theirs.
func TestHPCJobRound4RefusesControlCharacters(t *testing.T) {
	tests := []struct{ name, id string }{
		{"ESC", "job\x1b]0;pwned\x07"},
		{"CR", "job\rA"},
		{"NUL", "job\x00A"},
		{"DEL", "job\x7fA"},
		{"C1", "job\u009bA"},
		{"invalid UTF-8", "job\xffA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "0", "ok-job\n"+tt.id+"\n")
			write(t, dir, "1", "job-1\n")
			logger, hook := logtest.NewNullLogger()
			e, err := New(dir, WithLogger(logger))
			require.NoError(t, err)
			require.NoError(t, e.Refresh())
			for _, v := range rowsOf(e, gpu(0)) {
				assert.NotContains(t, v, tt.id[3:4])
			}
			assert.Equal(t, []string{"job-1"}, e.Values(gpu(1)))
			require.NotEmpty(t, hook.AllEntries())
			assert.Contains(t, errString(hook.AllEntries()[0].Data["error"]), filepath.Join(dir, "0")+":2")
		})
	}
}

// TestHPCJobRound4OnlyKnownGPUs (round 4, item 5): files naming GPUs the
// node does not have are neither parsed nor held; with the entity list not
// known yet, GPU indexes past maxGPUIndex are left out.
func TestHPCJobRound4OnlyKnownGPUs(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 3,000 files")
	}
	dir := t.TempDir()
	long := strings.Repeat("j", maxJobIDLen-4)
	var content strings.Builder
	for i := range maxJobsPerFile {
		content.WriteString(long + strconv.Itoa(1000+i) + "\n")
	}
	for g := range 3000 {
		write(t, dir, strconv.Itoa(g), content.String())
	}
	write(t, dir, "1.2", "mig-job\n")
	write(t, dir, "1.9", "other-mig\n")

	var known []*source.Entity
	e := newQuiet(t, dir, WithEntities(func() []*source.Entity { return known }))
	require.NoError(t, e.Refresh())
	assert.LessOrEqual(t, len(*e.jobs.Load()), maxGPUIndex+1+2, "before the entity list is known")

	known = []*source.Entity{gpu(0), gpu(1), mig(1, 2)}
	require.NoError(t, e.Refresh())
	assert.Equal(t, 3, len(*e.jobs.Load()), "GPU 0, GPU 1 and MIG 1.2 only")
	assert.Len(t, e.Values(gpu(0)), 1)
	assert.Equal(t, []string{"mig-job"}, e.Values(mig(1, 2)))
	assert.Nil(t, e.Values(gpu(7)))
}
