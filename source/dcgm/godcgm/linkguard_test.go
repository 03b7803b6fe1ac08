package godcgm

import (
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const goDCGMPkg = "github.com/NVIDIA/go-dcgm/pkg/dcgm"

// handleGuard is compiled into go-dcgm's package, next to its cgo-translated
// sources, so that it can name the unexported variable profpause.go links
// to. It does not compile when go-dcgm renames the variable, changes its
// type's layout, or changes the size of DCGM's handle.
const handleGuard = `package dcgm

import "unsafe"

var _ struct{ handle _Ctype_dcgmHandle_t } = handle

var _ [unsafe.Sizeof(uintptr(0))]byte = [unsafe.Sizeof(handle)]byte{}
`

const guardFile = "gpuscope_handle_guard.go"

// TestLinkedHandleMatchesGoDCGM is the compile-time check of profpause.go's
// //go:linkname: the linker accepts a linknamed variable whatever its name
// resolves to and whatever its type, so a go-dcgm release that renamed or
// retyped its handle would leave goDCGMHandle reading zero or garbage. Go
// cannot name another package's unexported variable, so the assertion is
// type-checked by the Go type checker inside go-dcgm's package, over the
// very sources (after cgo) that this module builds. The mutated cases show
// the guard fails to compile when go-dcgm changes.
func TestLinkedHandleMatchesGoDCGM(t *testing.T) {
	files, exports := goDCGMCompiledFiles(t)
	tests := []struct {
		name string
		// from and to rewrite go-dcgm's sources; empty from leaves them.
		from, to  string
		wantError string
	}{
		{name: "go-dcgm as built"},
		{name: "handle renamed", from: `(?m)^(\s+)handle(\s+dcgmHandle)$`, to: "${1}connHandle${2}", wantError: "undefined: handle"},
		{name: "handle type grows a field", from: `type dcgmHandle struct\{`, to: "type dcgmHandle struct{ refs int;", wantError: "cannot use handle"},
		{name: "handle becomes a pointer", from: `(?m)^(\s+)handle(\s+)dcgmHandle$`, to: "${1}handle${2}*dcgmHandle", wantError: "cannot use handle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srcs := files
			if tt.from != "" {
				srcs = rewrite(t, files, tt.from, tt.to)
			}
			errs := typeCheckWithGuard(t, srcs, exports)
			if tt.wantError == "" {
				require.Empty(t, errs, "go-dcgm's handle no longer matches what profpause.go links to; see the comment there")
				return
			}
			require.NotEmpty(t, errs, "the guard compiled although go-dcgm's handle changed")
			require.Contains(t, strings.Join(errs, "\n"), tt.wantError)
		})
	}
}

// goDCGMCompiledFiles returns go-dcgm's package sources as the build
// compiles them (after cgo), and the export data of every package they
// import, both from the build cache.
func goDCGMCompiledFiles(t *testing.T) (map[string][]byte, map[string]string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-compiled", "-export", "-deps",
		"-f", "{{.ImportPath}}\t{{.Export}}\t{{.Dir}}\t{{join .CompiledGoFiles \"\\t\"}}", goDCGMPkg).Output()
	require.NoError(t, err, "go list %s: %s", goDCGMPkg, stderrOf(err))
	exports := map[string]string{}
	files := map[string][]byte{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		exports[f[0]] = f[1]
		if f[0] != goDCGMPkg {
			continue
		}
		// Files cgo did not translate are named relative to the package
		// directory; the translated ones live in the build cache.
		for _, path := range f[3:] {
			if !filepath.IsAbs(path) {
				path = filepath.Join(f[2], path)
			}
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			files[path] = b
		}
	}
	require.NotEmpty(t, files, "go list gave no compiled files for %s", goDCGMPkg)
	return files, exports
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func rewrite(t *testing.T, files map[string][]byte, from, to string) map[string][]byte {
	t.Helper()
	re := regexp.MustCompile(from)
	out := make(map[string][]byte, len(files))
	changed := false
	for path, b := range files {
		nb := re.ReplaceAll(b, []byte(to))
		changed = changed || !bytes.Equal(nb, b)
		out[path] = nb
	}
	require.True(t, changed, "%q matches nothing in go-dcgm's sources; update this case to the current go-dcgm", from)
	return out
}

// typeCheckWithGuard type-checks go-dcgm's package plus handleGuard and
// returns the errors reported in handleGuard.
func typeCheckWithGuard(t *testing.T, files map[string][]byte, exports map[string]string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var parsed []*ast.File
	for path, b := range files {
		f, err := parser.ParseFile(fset, path, b, parser.SkipObjectResolution)
		require.NoError(t, err)
		parsed = append(parsed, f)
	}
	g, err := parser.ParseFile(fset, guardFile, handleGuard, 0)
	require.NoError(t, err)
	parsed = append(parsed, g)

	var errs []string
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
			return os.Open(exports[path])
		}),
		Sizes: types.SizesFor("gc", runtime.GOARCH),
		Error: func(err error) {
			if te, ok := err.(types.Error); ok && fset.Position(te.Pos).Filename == guardFile {
				errs = append(errs, te.Msg)
			}
		},
	}
	_, _ = conf.Check(goDCGMPkg, fset, parsed, nil)
	return errs
}
