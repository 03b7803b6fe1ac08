// Package layout checks the shape of the source tree that docs/architecture.md
// describes: every package says its concern and is on its map, internal/
// stays a short list of stages, only the commands read the command line, and
// functions and files stay small.
package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// maxInternalPackages bounds internal/'s top-level entries, so that the
// folder list keeps reading as the data flow.
const maxInternalPackages = 10

// maxFuncLines is the longest hand-written function the tree accepts outside
// the exceptions below.
const maxFuncLines = 80

// longFuncsAllowed are the data tables, fakes and generators that may stay
// longer than maxFuncLines: each is one table or one scripted fake, and a
// split would only scatter it. At most five.
var longFuncsAllowed = map[string]bool{
	"source/nvml/nvmlfake/fake.go:GPU.install":                          true,
	"source/nvml/nvmlfake/fake.go:Fake.installServer":                   true,
	"counters/fieldid/internal/gen/render.go:render":                    true,
	"grafana/dash/cluster.go:Cluster":                                   true,
	"internal/testkit/apiservertest/apiservertest.go:Server.serveWatch": true,
}

// maxFileLines is the longest hand-written production file the tree accepts
// outside the exceptions below: past it, a file holds more than one concern.
const maxFileLines = 600

// longFilesAllowed are the scripted fakes of a library's whole surface and
// the field generator, each one program that a split would only scatter. At
// most three.
var longFilesAllowed = map[string]bool{
	"source/dcgm/dcgmfake/fake.go":          true,
	"source/nvml/nvmlfake/fake.go":          true,
	"counters/fieldid/internal/gen/main.go": true,
}

// goFile is one hand-written, non-test Go file of the repository.
type goFile struct {
	rel  string
	fset *token.FileSet
	ast  *ast.File
}

func sourceFiles(t *testing.T) []goFile {
	t.Helper()
	root := e2etest.RepoRoot()
	var out []goFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin" || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, goFile{rel: filepath.ToSlash(rel), fset: fset, ast: f})
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, out)
	return out
}

func TestEveryPackageSaysItsConcern(t *testing.T) {
	documented := map[string]bool{}
	for _, f := range sourceFiles(t) {
		dir := filepath.Dir(f.rel)
		if _, seen := documented[dir]; !seen {
			documented[dir] = false
		}
		if f.ast.Doc != nil && strings.TrimSpace(f.ast.Doc.Text()) != "" {
			documented[dir] = true
		}
	}
	for dir, ok := range documented {
		assert.True(t, ok, "package %s has no package comment saying its concern", dir)
	}
}

func TestInternalIsAShortListOfStages(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(e2etest.RepoRoot(), "internal"))
	require.NoError(t, err)
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	assert.LessOrEqual(t, len(dirs), maxInternalPackages, "internal/ holds %v", dirs)
}

func TestOnlyCommandsReadTheCommandLine(t *testing.T) {
	for _, f := range sourceFiles(t) {
		for _, imp := range f.ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "github.com/urfave/cli/v2" {
				assert.True(t, strings.HasPrefix(f.rel, "cmd/"), "%s imports urfave/cli: only cmd/ reads flags, everything else takes internal/config's Config", f.rel)
			}
		}
	}
}

func TestFunctionsStaySmall(t *testing.T) {
	var long []string
	for _, f := range sourceFiles(t) {
		for _, d := range f.ast.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			lines := f.fset.Position(fn.End()).Line - f.fset.Position(fn.Pos()).Line + 1
			if lines <= maxFuncLines {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				name = receiverName(fn.Recv.List[0].Type) + "." + name
			}
			key := f.rel + ":" + name
			if !longFuncsAllowed[key] {
				long = append(long, key+" ("+strconv.Itoa(lines)+" lines)")
			}
		}
	}
	sort.Strings(long)
	assert.Empty(t, long, "functions over %d lines: split each into named steps", maxFuncLines)
	assert.LessOrEqual(t, len(longFuncsAllowed), 5, "at most five long data tables and fakes")
}

func TestFilesStaySmall(t *testing.T) {
	var long []string
	for _, f := range sourceFiles(t) {
		lines := f.fset.File(f.ast.Pos()).LineCount()
		if lines > maxFileLines && !longFilesAllowed[f.rel] {
			long = append(long, f.rel+" ("+strconv.Itoa(lines)+" lines)")
		}
	}
	sort.Strings(long)
	assert.Empty(t, long, "files over %d lines: move each concern into a file named for it", maxFileLines)
	assert.LessOrEqual(t, len(longFilesAllowed), 3, "at most three long fakes and generators")
}

func receiverName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverName(x.X)
	case *ast.IndexExpr:
		return receiverName(x.X)
	case *ast.IndexListExpr:
		return receiverName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}
