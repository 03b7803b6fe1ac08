// Package release checks what `make release` ships, as a user who downloads
// it would: both archives and their contents, SHA256SUMS with sha256sum -c,
// the SBOMs, and the linux/arm64 binary from its archive running under
// qemu-user on the sim source.
package release

import (
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// arches are the release's architectures, with what a binary of each is.
var arches = []struct {
	goarch  string
	machine elf.Machine
	crossCC string // the C cross compiler on a machine of the other architecture
	qemu    string // the qemu-user binary that runs it there
}{
	{"amd64", elf.EM_X86_64, "x86_64-linux-gnu-gcc", "qemu-x86_64"},
	{"arm64", elf.EM_AARCH64, "aarch64-linux-gnu-gcc", "qemu-aarch64"},
}

var (
	distDir  string
	once     sync.Once
	buildOut []byte
	buildErr error
	version  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if distDir != "" {
		_ = os.RemoveAll(distDir)
	}
	os.Exit(code)
}

// requireTools skips the test, or fails it under CI=true, where the cross
// compilers or qemu that a release needs are missing.
func requireTools(t *testing.T) {
	t.Helper()
	for _, a := range arches {
		if a.goarch == runtime.GOARCH {
			continue
		}
		e2etest.RequireTool(t, a.crossCC)
		qemuFor(t, a.goarch)
	}
	e2etest.RequireTool(t, "sha256sum")
}

// qemuFor returns the qemu-user binary for goarch: Debian's
// qemu-user-static names it qemu-aarch64-static, newer packages
// qemu-aarch64.
func qemuFor(t *testing.T, goarch string) string {
	t.Helper()
	for _, a := range arches {
		if a.goarch != goarch {
			continue
		}
		for _, name := range []string{a.qemu + "-static", a.qemu} {
			if p, err := exec.LookPath(name); err == nil {
				return p
			}
		}
		return e2etest.RequireTool(t, a.qemu+"-static")
	}
	t.Fatalf("no architecture %s", goarch)
	return ""
}

// makeRelease runs `make release` once per test process into a temporary
// DIST and returns that folder and the version it was built as.
func makeRelease(t *testing.T) (string, string) {
	t.Helper()
	requireTools(t)
	once.Do(func() {
		root := e2etest.RepoRoot()
		out, err := exec.Command(filepath.Join(root, "scripts", "version.sh")).Output()
		if err != nil {
			buildErr = err
			return
		}
		version = strings.TrimSpace(string(out))
		distDir, buildErr = os.MkdirTemp("", "gpuscope-dist-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("make", "--no-print-directory", "release", "DIST="+distDir, "VERSION="+version)
		cmd.Dir = root
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("make release: %v\n%s", buildErr, buildOut)
	}
	return distDir, version
}

func archiveName(version, goarch string) string {
	return "gpuscope-" + version + "-linux-" + goarch
}

func TestArchivesHoldTheBinaryAndItsFiles(t *testing.T) {
	dist, version := makeRelease(t)
	for _, a := range arches {
		t.Run(a.goarch, func(t *testing.T) {
			name := archiveName(version, a.goarch)
			dir := extract(t, filepath.Join(dist, name+".tar.gz"))
			top, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, top, 1, "one folder at the archive's top")
			assert.Equal(t, name, top[0].Name())

			root := filepath.Join(dir, name)
			for _, f := range []string{"gpuscope", "LICENSE", "README.md", "CHANGELOG.md", "etc/default-counters.csv", "etc/dcp-metrics.csv"} {
				assert.FileExists(t, filepath.Join(root, f))
			}
			matches, _ := filepath.Glob(filepath.Join(root, "etc", "*.go"))
			assert.Empty(t, matches, "the archive carries the counters files, not etc's Go code")

			st, err := os.Stat(filepath.Join(root, "gpuscope"))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o755), st.Mode().Perm(), "the binary is executable")
			f, err := elf.Open(filepath.Join(root, "gpuscope"))
			require.NoError(t, err)
			defer f.Close()
			assert.Equal(t, a.machine, f.Machine, "the binary is built for %s", a.goarch)
		})
	}
}

func TestSHA256SUMSVerifiesAndCatchesATamperedFile(t *testing.T) {
	dist, version := makeRelease(t)
	cmd := exec.Command("sha256sum", "-c", "SHA256SUMS")
	cmd.Dir = dist
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "sha256sum -c SHA256SUMS:\n%s", out)
	for _, a := range arches {
		name := archiveName(version, a.goarch)
		assert.Contains(t, string(out), name+".tar.gz: OK")
		assert.Contains(t, string(out), name+".sbom.cdx.json: OK")
		assert.Contains(t, string(out), name+".gpuscope-client.sbom.cdx.json: OK")
	}
	for _, f := range []string{"kubernetes.yaml", "dashboards-configmap.yaml"} {
		assert.Contains(t, string(out), "gpuscope-"+version+"-"+f+": OK")
	}

	// The same check on a copy with one byte of the arm64 archive changed.
	bad := t.TempDir()
	var files []string
	for _, a := range arches {
		name := archiveName(version, a.goarch)
		files = append(files, name+".tar.gz", name+".sbom.cdx.json", name+".gpuscope-client.sbom.cdx.json")
	}
	for _, f := range append(files, "SHA256SUMS") {
		b, err := os.ReadFile(filepath.Join(dist, f))
		require.NoError(t, err)
		if strings.HasSuffix(f, "arm64.tar.gz") {
			b[len(b)/2] ^= 0xff
		}
		require.NoError(t, os.WriteFile(filepath.Join(bad, f), b, 0o644))
	}
	cmd = exec.Command("sha256sum", "-c", "SHA256SUMS")
	cmd.Dir = bad
	out, err = cmd.CombinedOutput()
	assert.Error(t, err, "sha256sum -c passes a changed archive:\n%s", out)
	assert.Contains(t, string(out), archiveName(version, "arm64")+".tar.gz: FAILED")
}

// sbom is the part of a CycloneDX document the test reads.
type sbom struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component  component `json:"component"`
		Properties []struct {
			Name, Value string
		} `json:"properties"`
	} `json:"metadata"`
	Components []component `json:"components"`
}

type component struct {
	Name, Version, Purl string
}

func TestSBOMListsTheModulesOfEachBinary(t *testing.T) {
	dist, version := makeRelease(t)
	want := map[string]string{}
	for _, mod := range []string{"github.com/NVIDIA/go-nvml", "github.com/NVIDIA/go-dcgm", "github.com/prometheus/client_golang"} {
		cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", mod)
		cmd.Dir = e2etest.RepoRoot()
		out, err := cmd.Output()
		require.NoError(t, err, "go list -m %s", mod)
		want[mod] = strings.TrimSpace(string(out))
	}
	for _, a := range arches {
		t.Run(a.goarch, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dist, archiveName(version, a.goarch)+".sbom.cdx.json"))
			require.NoError(t, err)
			var doc sbom
			require.NoError(t, json.Unmarshal(b, &doc))
			assert.Equal(t, "CycloneDX", doc.BOMFormat)
			assert.NotEmpty(t, doc.SpecVersion)
			assert.Equal(t, "github.com/gpuscope/gpuscope", doc.Metadata.Component.Name)
			assert.Equal(t, "v"+version, doc.Metadata.Component.Version)
			props := map[string]string{}
			for _, p := range doc.Metadata.Properties {
				props[p.Name] = p.Value
			}
			assert.Equal(t, a.goarch, props["cdx:gomod:build:env:GOARCH"], "the SBOM describes the %s binary", a.goarch)
			got := map[string]string{}
			for _, c := range doc.Components {
				got[c.Name] = c.Version
			}
			for mod, v := range want {
				assert.Equal(t, v, got[mod], "%s in the SBOM at go.mod's version", mod)
			}
			assert.NotContains(t, got, "github.com/charmbracelet/bubbletea", "the exporter links no terminal UI")

			// gpuscope-client, shipped in the same archive, has its own.
			b, err = os.ReadFile(filepath.Join(dist, archiveName(version, a.goarch)+".gpuscope-client.sbom.cdx.json"))
			require.NoError(t, err)
			var client sbom
			require.NoError(t, json.Unmarshal(b, &client))
			assert.Equal(t, "CycloneDX", client.BOMFormat)
			mods := map[string]bool{}
			for _, c := range client.Components {
				mods[c.Name] = true
			}
			for _, mod := range []string{"github.com/charmbracelet/bubbletea", "gonum.org/v1/plot"} {
				assert.True(t, mods[mod], "%s in gpuscope-client's SBOM", mod)
			}
		})
	}
}

// extract unpacks a .tar.gz with tar, as a user would, into a new folder.
func extract(t *testing.T, archive string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("tar", "-xzf", archive, "-C", dir).CombinedOutput()
	require.NoError(t, err, "tar -xzf %s: %s", archive, out)
	return dir
}
