// Package image checks the Dockerfile and its build context without a
// Docker engine: no image can be built where the tests run, so the file is
// parsed and its promises are checked one by one.
package image

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
	line int
}

type stage struct {
	name, base string
	platform   string // FROM --platform=..., empty for the target platform
	ins        []instruction
}

func parseDockerfile(t *testing.T, path string) (args map[string]string, stages []*stage) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	args = map[string]string{}
	var cur strings.Builder
	start := 0
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, rest, _ := strings.Cut(text, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(rest), line: start}
		switch {
		case in.cmd == "FROM":
			fields := strings.Fields(in.args)
			s := &stage{}
			if p, ok := strings.CutPrefix(fields[0], "--platform="); ok {
				s.platform, fields = p, fields[1:]
			}
			s.base = fields[0]
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				s.name = fields[2]
			}
			stages = append(stages, s)
		case len(stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case len(stages) > 0:
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		}
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	require.NoError(t, sc.Err())
	flush()
	return args, stages
}

func find(stages []*stage, name string) *stage {
	for _, s := range stages {
		if s.name == name {
			return s
		}
	}
	return nil
}

func (s *stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

func (s *stage) last(cmd string) string {
	list := s.all(cmd)
	if len(list) == 0 {
		return ""
	}
	return list[len(list)-1].args
}

func TestDockerfile(t *testing.T) {
	root := e2etest.RepoRoot()
	args, stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))

	t.Run("the default target is the DCGM runtime on NVIDIA's CUDA base", func(t *testing.T) {
		require.NotEmpty(t, stages)
		rt := stages[len(stages)-1]
		assert.Equal(t, "runtime", rt.name, "docker build without --target builds the last stage")
		assert.Equal(t, "${BASE_IMAGE}", rt.base)
		assert.Equal(t, "nvcr.io/nvidia/cuda:${CUDA_VERSION}-base-ubuntu${UBUNTU_VERSION}", args["BASE_IMAGE"])
		assert.NotEmpty(t, args["CUDA_VERSION"], "the CUDA version is pinned by a build argument")
		assert.NotEmpty(t, args["UBUNTU_VERSION"])
	})

	t.Run("the runtime installs DCGM core and proprietary at the pinned version, and libstdc++", func(t *testing.T) {
		rt := find(stages, "runtime")
		require.NotNil(t, rt)
		var dcgmArg string
		for _, a := range rt.all("ARG") {
			if k, v, _ := strings.Cut(a.args, "="); k == "DCGM_VERSION" {
				dcgmArg = v
			}
		}
		assert.Regexp(t, `^4\.\d+\.\d+-\d+$`, dcgmArg, "DCGM_VERSION pins a DCGM 4 package version")
		var run string
		for _, r := range rt.all("RUN") {
			run += r.args + "\n"
		}
		for _, pkg := range []string{"datacenter-gpu-manager-4-core=1:${DCGM_VERSION}", "datacenter-gpu-manager-4-proprietary=1:${DCGM_VERSION}", "libstdc++6"} {
			assert.Contains(t, run, pkg)
		}
		assert.Contains(t, run, "rm -rf /var/lib/apt/lists/*", "the apt lists do not weigh on the image")
	})

	t.Run("the binaries and the counters files are copied", func(t *testing.T) {
		for _, name := range []string{"runtime", "nvml"} {
			s := find(stages, name)
			require.NotNil(t, s, name)
			var copies []string
			for _, c := range s.all("COPY") {
				copies = append(copies, c.args)
			}
			joined := strings.Join(copies, "\n")
			// gpuscope top and capture run the gpuscope-client beside gpuscope.
			assert.Regexp(t, `--from=build\S* /out/gpuscope /out/gpuscope-client /usr/bin/`, joined, name)
			assert.Contains(t, joined, "etc/default-counters.csv etc/dcp-metrics.csv etc/nvidia-gpu-exporter.csv /etc/gpuscope/", name)
			assert.Contains(t, s.last("ENTRYPOINT"), "/usr/bin/gpuscope", name)
			assert.Contains(t, s.last("CMD"), "/etc/gpuscope/default-counters.csv", name)
		}
	})

	t.Run("/etc/dcgm-exporter holds dcgm-exporter's own counters files", func(t *testing.T) {
		// dcgm-exporter's image keeps its etc/ in /etc/dcgm-exporter
		// (docker/Dockerfile: COPY etc /etc/dcgm-exporter), and deployments
		// pass those paths to -f (deployment/values.yaml: arguments ["-f",
		// "/etc/dcgm-exporter/default-counters.csv"]): a swapped image must
		// serve the same field set and help texts from them.
		dir := compattest.Dir(t)
		for _, name := range []string{"runtime", "nvml"} {
			got := installed(t, root, find(stages, name))
			for _, file := range []string{"default-counters.csv", "dcp-metrics-included.csv"} {
				src, ok := got["/etc/dcgm-exporter/"+file]
				if !assert.True(t, ok, "%s: nothing installs /etc/dcgm-exporter/%s", name, file) {
					continue
				}
				want, err := os.ReadFile(filepath.Join(dir, file))
				require.NoError(t, err)
				have, err := os.ReadFile(filepath.Join(root, src))
				require.NoError(t, err)
				assert.True(t, string(want) == string(have), "%s: /etc/dcgm-exporter/%s comes from %s, which is not dcgm-exporter's file", name, file, src)
			}
		}
	})

	t.Run("both images run as a non-root user by default", func(t *testing.T) {
		for _, name := range []string{"runtime", "nvml"} {
			s := find(stages, name)
			user := s.last("USER")
			require.NotEmpty(t, user, name)
			uid, _, _ := strings.Cut(user, ":")
			assert.NotEqual(t, "0", uid, name)
			assert.NotEqual(t, "root", uid, name)
			assert.Regexp(t, `^\d+$`, uid, "%s: a numeric UID, so runAsNonRoot can check it", name)
		}
	})

	t.Run("the build stages build the exporter with the version from the build arguments", func(t *testing.T) {
		for _, name := range []string{"build", "build-nvml"} {
			s := find(stages, name)
			require.NotNil(t, s, name)
			run := s.last("RUN")
			assert.Contains(t, run, "go build", name)
			assert.Contains(t, run, "./cmd/gpuscope ", name)
			assert.Contains(t, run, "./cmd/gpuscope-client", name)
			assert.Contains(t, run, "version.Version=${VERSION}", name)
		}
	})
}

// installed maps each path a stage's COPY instructions from the build
// context create to the repository file it comes from. A source folder
// installs its files under the destination, as COPY does.
func installed(t *testing.T, root string, s *stage) map[string]string {
	t.Helper()
	require.NotNil(t, s)
	out := map[string]string{}
	for _, c := range s.all("COPY") {
		var f []string
		for _, w := range strings.Fields(c.args) {
			if !strings.HasPrefix(w, "--") {
				f = append(f, w)
			}
		}
		if len(f) < 2 || strings.Contains(c.args, "--from=") {
			continue
		}
		dest := f[len(f)-1]
		for _, src := range f[:len(f)-1] {
			info, err := os.Stat(filepath.Join(root, src))
			if err != nil {
				continue
			}
			if !info.IsDir() {
				if strings.HasSuffix(dest, "/") {
					out[dest+filepath.Base(src)] = src
				} else {
					out[dest] = src
				}
				continue
			}
			entries, err := os.ReadDir(filepath.Join(root, src))
			require.NoError(t, err)
			for _, e := range entries {
				if !e.IsDir() {
					out[strings.TrimSuffix(dest, "/")+"/"+e.Name()] = filepath.Join(src, e.Name())
				}
			}
		}
	}
	return out
}

// dockerignored says whether the build context leaves path out, for the
// pattern forms .dockerignore uses here: a name or dir/, **/ prefixes,
// globs, and ! exceptions; the last matching line wins.
func dockerignored(patterns []string, path string) bool {
	ignored := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimSuffix(strings.TrimPrefix(p, "!"), "/")
		if matchPattern(p, path) {
			ignored = !neg
		}
	}
	return ignored
}

func matchPattern(p, path string) bool {
	parts := strings.Split(path, "/")
	any := strings.HasPrefix(p, "**/")
	p = strings.TrimPrefix(p, "**/")
	// A pattern matches the path or any folder above it.
	for i := 1; i <= len(parts); i++ {
		for j := 0; j < i; j++ {
			if j > 0 && !any {
				break
			}
			if ok, _ := filepath.Match(p, strings.Join(parts[j:i], "/")); ok {
				return true
			}
		}
	}
	return false
}

func readDockerignore(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func TestDockerignoreMatcher(t *testing.T) {
	pats := []string{".git", "bin/", "**/*_test.go", "**/testdata/", "test/", "*.md", "!README.md"}
	tests := map[string]bool{
		"bin/gpuscope": true, ".git/HEAD": true, "cmd/gpuscope/main_test.go": true, "cmd/gpuscope/main.go": false,
		"internal/engine/testdata/x.csv": true, "test/e2e/core_test.go": true, "docs.md": true, "README.md": false,
		"etc/default-counters.csv": false, "docs/x.md": false,
	}
	for path, want := range tests {
		assert.Equal(t, want, dockerignored(pats, path), path)
	}
}

// TestBuildContextHoldsWhatTheBuildNeeds: every file the exporter's packages
// compile or embed, and every file the Dockerfile copies, is in the context
// that .dockerignore leaves.
func TestBuildContextHoldsWhatTheBuildNeeds(t *testing.T) {
	root := e2etest.RepoRoot()
	pats := readDockerignore(t, root)
	cmd := exec.Command("go", "list", "-deps", "-json", "./cmd/gpuscope", "./cmd/gpuscope-client")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var files []string
	for dec.More() {
		var p struct {
			Dir, Module                   any
			ImportPath                    string
			GoFiles, CgoFiles, EmbedFiles []string
			Standard                      bool
		}
		require.NoError(t, dec.Decode(&p))
		dir, _ := p.Dir.(string)
		if p.Standard || !strings.HasPrefix(p.ImportPath, "github.com/gpuscope/gpuscope") {
			continue
		}
		for _, f := range append(append(p.GoFiles, p.CgoFiles...), p.EmbedFiles...) {
			rel, err := filepath.Rel(root, filepath.Join(dir, f))
			require.NoError(t, err)
			files = append(files, filepath.ToSlash(rel))
		}
	}
	require.NotEmpty(t, files)
	files = append(files, "go.mod", "go.sum")
	_, stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	for _, s := range stages {
		for _, c := range s.all("COPY") {
			if strings.Contains(c.args, "--from=") {
				continue
			}
			f := strings.Fields(c.args)
			for _, src := range f[:len(f)-1] {
				if src == "." {
					continue
				}
				_, err := os.Stat(filepath.Join(root, src))
				assert.NoError(t, err, "Dockerfile line %d copies %s", c.line, src)
				files = append(files, src)
			}
		}
	}
	for _, f := range files {
		assert.False(t, dockerignored(pats, f), "%s is needed by the build but .dockerignore leaves it out", f)
	}
}
