package layout

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// mapHeader opens each table of docs/architecture.md's package map.
const mapHeader = "| package | its one concern |"

// architectureMap is the package map of docs/architecture.md: each row's
// package, and what the row says of it.
func architectureMap(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(e2etest.RepoRoot(), "docs", "architecture.md"))
	require.NoError(t, err)
	defer f.Close()
	row := regexp.MustCompile("^\\| `([^`]+)` \\| (.*) \\|$")
	out := map[string]string{}
	inMap := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == mapHeader:
			inMap = true
		case !strings.HasPrefix(line, "|"):
			inMap = false
		case inMap:
			if m := row.FindStringSubmatch(line); m != nil {
				_, dup := out[m[1]]
				assert.False(t, dup, "docs/architecture.md maps %s twice", m[1])
				out[m[1]] = m[2]
			}
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// modulePackages are the folders of the module's Go packages, relative to
// the root; the modules nested in it (grafana, tools, the chart's tests)
// are their own.
func modulePackages(t *testing.T) []string {
	t.Helper()
	root := e2etest.RepoRoot()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p == root {
				return nil
			}
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin" || name == "dist" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	require.NoError(t, err)
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// TestEveryPackageIsOnTheMap: docs/architecture.md's package tables name
// every Go package of the module (test/... stands for the packages under
// test/), and every package they name exists, so the map cannot fall
// behind a package added, moved or removed.
func TestEveryPackageIsOnTheMap(t *testing.T) {
	m := architectureMap(t)
	require.NotEmpty(t, m, "no package table (%q) in docs/architecture.md", mapHeader)
	pkgs := modulePackages(t)
	exists := map[string]bool{}
	for _, p := range pkgs {
		exists[p] = true
		if strings.HasPrefix(p, "test/") {
			continue
		}
		_, ok := m[p]
		assert.True(t, ok, "package %s is not on docs/architecture.md's map", p)
	}
	for p := range m {
		if p == "test/..." {
			continue
		}
		assert.True(t, exists[p], "docs/architecture.md maps %s, which is no package of the module", p)
	}
}

// TestEveryEngineFileIsOnTheMap: the engine's row says it keeps a file per
// concern; it names each of its hand-written files.
func TestEveryEngineFileIsOnTheMap(t *testing.T) {
	row := architectureMap(t)["internal/engine"]
	require.NotEmpty(t, row, "internal/engine has no row on the map")
	files, err := filepath.Glob(filepath.Join(e2etest.RepoRoot(), "internal", "engine", "*.go"))
	require.NoError(t, err)
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		assert.Contains(t, row, "`"+name+"`", "internal/engine's row does not say what %s is for", name)
	}
}
