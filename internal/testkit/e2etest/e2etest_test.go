package e2etest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBuildFlagsAreMakeBuilds: the tests' builds compile with exactly the
// flags of make build's `go build` lines, so that on a cold Go build cache
// the release build (test/release) finds every package compiled.
func TestBuildFlagsAreMakeBuilds(t *testing.T) {
	RequireTool(t, "make")
	root := RepoRoot()
	flags, err := BuildFlags(root)
	require.NoError(t, err)
	require.Contains(t, flags, "-trimpath", "the release is built with -trimpath")

	cmd := exec.Command("make", "--no-print-directory", "-n", "build", "BIN=/nonexistent/gpuscope", "VERSION=1.0.0")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var builds int
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, " go build ") {
			continue
		}
		builds++
		assert.Contains(t, line, " go build "+strings.Join(flags, " ")+" ", "make build's line: %s", line)
	}
	assert.Equal(t, 2, builds, "make build builds gpuscope and gpuscope-client:\n%s", out)
}
