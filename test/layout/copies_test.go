package layout

import (
	"bytes"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// trackedFiles returns the regular files git tracks (links left out: the
// chart's files/ reaches the rules, dashboards and counters files through
// links), with their contents as they are in the work tree.
func trackedFiles(t *testing.T) map[string][]byte {
	t.Helper()
	root := e2etest.RepoRoot()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("git ls-files: %v", err)
		}
		t.Skipf("not a git work tree (git ls-files: %v)", err)
	}
	files := map[string][]byte{}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		p := filepath.Join(root, rel)
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		files[rel] = b
	}
	require.NotEmpty(t, files)
	return files
}

// No file in git is a byte copy of another: a copy drifts from its source
// unless a script and a test keep them equal. What must appear in two
// places is generated where it is needed (`make release`) or reached
// through a link (the chart's files/).
func TestNoTrackedFileIsACopy(t *testing.T) {
	byHash := map[[32]byte][]string{}
	for rel, b := range trackedFiles(t) {
		if len(b) == 0 {
			continue // empty files are alike without being copies
		}
		h := sha256.Sum256(b)
		byHash[h] = append(byHash[h], rel)
	}
	for _, paths := range byHash {
		sort.Strings(paths)
		assert.Len(t, paths, 1, "%s are copies of one another: keep one and link to it or generate the others", strings.Join(paths, ", "))
	}
}

// renderedSources are the files that generators render into other files:
// the rules and the dashboards, which the chart's ConfigMaps, the plain
// manifests and the dashboards' ConfigMap carry, indented. Those
// renderings ship with the release (scripts/release.sh) and are not kept
// in git.
var renderedSources = []string{"deploy/prometheus/*.yml", "grafana/dashboards/*.json"}

// helmSourceLine begins the line by which helm template marks each object
// it renders from the chart; put together here so that this file does not
// hold it.
var helmSourceLine = []byte("# Source: " + "gpuscope/templates/")

// headLines is how many lines of a source a rendering must hold, in order,
// to count as one: more than any excerpt a document quotes.
const headLines = 25

// No file in git is a rendering of the chart (helm template marks each
// object with "# Source: CHART/templates/...") or holds a rule file or
// dashboard, indented or not, as a ConfigMap's data does.
func TestNoTrackedFileIsARendering(t *testing.T) {
	root := e2etest.RepoRoot()
	files := trackedFiles(t)
	heads := map[string]string{}
	for _, glob := range renderedSources {
		paths, err := filepath.Glob(filepath.Join(root, glob))
		require.NoError(t, err)
		require.NotEmpty(t, paths, glob)
		for _, p := range paths {
			rel, err := filepath.Rel(root, p)
			require.NoError(t, err)
			lines := strings.Split(normalized(files[rel]), "\n")
			require.Greater(t, len(lines), headLines, "%s is long enough to tell a rendering from a quote", rel)
			heads[rel] = strings.Join(lines[:headLines], "\n")
		}
	}
	for rel, b := range files {
		assert.False(t, bytes.Contains(b, helmSourceLine),
			"%s is a rendering of the Helm chart (helm template's # Source lines): `make release` renders the plain manifests", rel)
		norm := normalized(b)
		for src, head := range heads {
			if rel != src {
				assert.NotContains(t, norm, head, "%s holds a rendering of %s: generate it in `make release` instead of keeping it in git", rel, src)
			}
		}
	}
}

// normalized is a file's non-empty lines without their indentation.
func normalized(b []byte) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
