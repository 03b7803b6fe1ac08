package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/capturecheck"
	"github.com/gpuscope/gpuscope/internal/testkit/smicapture"
)

// sectionBodies cuts a shared capture into its sections' bodies, by the
// "phase :: title" line of each.
func sectionBodies(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	banner := regexp.MustCompile(`^#{20,}\s*$`)
	out := map[string]string{}
	var title string
	var body []string
	inBanner := false
	flush := func() {
		if title != "" {
			out[title] = strings.Join(body, "\n") + "\n"
		}
	}
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case banner.MatchString(l) && !inBanner:
			flush()
			title, body, inBanner = "", nil, true
		case banner.MatchString(l):
			inBanner = false
		case inBanner && strings.Contains(l, " :: "):
			title = strings.TrimPrefix(l, "# ")
		case !inBanner:
			body = append(body, l)
		}
	}
	flush()
	return out
}

// fakeSMI writes an nvidia-smi that answers the commands take-capture.sh
// runs with a shared capture's idle sections.
func fakeSMI(t *testing.T, dir, capture string) {
	t.Helper()
	secs := sectionBodies(t, capture)
	files := map[string]string{
		"q": "idle :: query (-q)", "help": "capabilities :: help-query-gpu",
		"csv": "idle :: query-gpu (csv, what the exporter parses)", "apps": "idle :: query-compute-apps (per-process)",
		"nvlink": "capabilities :: nvlink -s",
	}
	for name, title := range files {
		body, ok := secs[title]
		require.True(t, ok, "capture has no section %q", title)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
	}
	script := `#!/bin/bash
d="` + dir + `"
case "$1" in
  -q) cat "$d/q" ;;
  --help-query-gpu) cat "$d/help" ;;
  --query-gpu=*) cat "$d/csv" ;;
  --query-compute-apps=*) cat "$d/apps" ;;
  nvlink) cat "$d/nvlink" ;;
  *) echo "unexpected: $*" >&2; exit 9 ;;
esac
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755))
}

// TestTakeCaptureWritesWhatCheckCaptureReads runs take-capture.sh against
// an nvidia-smi that answers with a real capture's output: what it writes
// parses as a capture, holds the same GPU, and agrees field by field with
// the NVML source, as scripts/check-capture.sh checks it.
func TestTakeCaptureWritesWhatCheckCaptureReads(t *testing.T) {
	var mig string
	for _, f := range smicapture.TestFiles(t) {
		if strings.Contains(f, "-mig__") {
			mig = f
		}
	}
	require.NotEmpty(t, mig)
	dir := t.TempDir()
	fakeSMI(t, dir, mig)
	cmd := exec.Command("bash", "take-capture.sh")
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	require.NoError(t, err)
	path := filepath.Join(dir, "mine.txt")
	require.NoError(t, os.WriteFile(path, out, 0o600))

	c, err := smicapture.ParseFile(path)
	require.NoError(t, err)
	require.Len(t, c.Snapshots, 1, "idle only, without -load")
	g := c.Snapshots[0].GPUs[0]
	assert.Len(t, g.MIG, 4)
	assert.Equal(t, "NVIDIA H100 80GB HBM3", g.Field("name").Text(), "the --query-gpu row is there")
	assert.Equal(t, "none", c.Header["load"])
	rep, err := capturecheck.CheckFile(path)
	require.NoError(t, err)
	assert.Empty(t, rep.Mismatches())
}

// TestTakeCaptureEndsItsLoad: the load command runs in its own process
// group while the load snapshot is taken, and that group is ended when the
// script exits.
func TestTakeCaptureEndsItsLoad(t *testing.T) {
	files := smicapture.TestFiles(t)
	dir := t.TempDir()
	fakeSMI(t, dir, files[len(files)-1])
	pidFile := filepath.Join(dir, "load.pid")
	cmd := exec.Command("bash", "take-capture.sh", "-load", "echo $$ > "+pidFile+"; exec sleep 300")
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "CAPTURE_LOAD_WAIT=1")
	out, err := cmd.Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), "# load :: query (-q)")
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err, "the load command ran")
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	gone := func() bool {
		// Signal 0 only asks whether the process is there.
		return syscall.Kill(pid, 0) != nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for !gone() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !gone() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("load process %d still runs after take-capture.sh exited", pid)
	}
}
