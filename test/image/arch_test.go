package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// stubbed runs a RUN instruction's script with sh, as the builder does, but
// with a PATH of stubs: apt-get, go, rm, ldconfig and dpkg only log their
// arguments (and go the GOOS, GOARCH and CC it was given), so the script's
// choices per architecture can be read without a Docker engine. The apt
// sources it reads are those written under the returned folder's apt/.
func stubbed(t *testing.T, script string, env map[string]string, sources string) (calls string, out string, err error) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "apt", "sources.list.d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "apt", "sources.list.d", "cuda.list"), []byte(sources), 0o644))
	require.NoError(t, os.MkdirAll(bin, 0o755))
	logFile := filepath.Join(dir, "calls")
	stub := "#!/bin/sh\necho \"${0##*/} $* [GOOS=$GOOS GOARCH=$GOARCH CC=$CC]\" >>" + logFile + "\n"
	for _, name := range []string{"apt-get", "go", "rm", "ldconfig"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte(stub), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(bin, "dpkg"), []byte("#!/bin/sh\necho \"$FAKE_DPKG_ARCH\"\n"), 0o755))
	grep, err := exec.LookPath("grep")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(grep, filepath.Join(bin, "grep")))

	cmd := exec.Command("/bin/sh", "-c", strings.ReplaceAll(script, "/etc/apt/", filepath.Join(dir, "apt")+"/"))
	cmd.Env = []string{"PATH=" + bin}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	b, err := cmd.CombinedOutput()
	logged, _ := os.ReadFile(logFile)
	return string(logged), string(b), err
}

// runWith returns the stage's RUN instruction that contains marker.
func runWith(t *testing.T, s *stage, marker string) string {
	t.Helper()
	for _, r := range s.all("RUN") {
		if strings.Contains(r.args, marker) {
			return r.args
		}
	}
	t.Fatalf("stage %s has no RUN with %q", s.name, marker)
	return ""
}

func TestBuildStagesCrossCompileOnTheBuildPlatform(t *testing.T) {
	_, stages := parseDockerfile(t, filepath.Join(e2etest.RepoRoot(), "Dockerfile"))
	for _, name := range []string{"go", "build", "build-nvml"} {
		s := find(stages, name)
		require.NotNil(t, s, name)
		assert.Equal(t, "$BUILDPLATFORM", s.platform, "%s runs natively on the build machine; Go cross-compiles", name)
	}
	for _, name := range []string{"runtime", "nvml"} {
		assert.Empty(t, find(stages, name).platform, "%s is an image of the target platform", name)
	}

	tests := []struct {
		name, target, build string
		wantCross           []string // packages the install adds
		wantGOARCH, wantCC  string
		wantErr             string
	}{
		{"arm64 on amd64", "arm64", "amd64", []string{"gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"}, "arm64", "aarch64-linux-gnu-gcc", ""},
		{"amd64 on arm64", "amd64", "arm64", []string{"gcc-x86-64-linux-gnu", "libc6-dev-amd64-cross"}, "amd64", "x86_64-linux-gnu-gcc", ""},
		{"amd64 natively", "amd64", "amd64", nil, "amd64", "gcc", ""},
		{"arm64 natively", "arm64", "arm64", nil, "arm64", "gcc", ""},
		{"a builder without TARGETARCH builds natively", "", "", nil, "", "gcc", ""},
		{"another architecture is refused", "riscv64", "amd64", nil, "", "", "TARGETARCH=riscv64: gpuscope builds for amd64 and arm64"},
	}
	for _, stageName := range []string{"build", "build-nvml"} {
		s := find(stages, stageName)
		install, build := runWith(t, s, "cross="), runWith(t, s, "go build")
		for _, tt := range tests {
			t.Run(stageName+"/"+tt.name, func(t *testing.T) {
				env := map[string]string{"TARGETARCH": tt.target, "BUILDARCH": tt.build, "VERSION": "1.2.3", "REVISION": "abc"}
				calls, out, err := stubbed(t, install, env, "")
				if tt.wantErr != "" {
					assert.Error(t, err)
					assert.Contains(t, out, tt.wantErr)
					assert.NotContains(t, calls, "apt-get install")
					return
				}
				require.NoError(t, err, "%s", out)
				for _, pkg := range []string{"gcc-aarch64-linux-gnu", "gcc-x86-64-linux-gnu", "libc6-dev-arm64-cross", "libc6-dev-amd64-cross"} {
					want := false
					for _, w := range tt.wantCross {
						want = want || w == pkg
					}
					assert.Equal(t, want, strings.Contains(calls, pkg), "installs %s: %s", pkg, calls)
				}

				calls, out, err = stubbed(t, build, env, "")
				require.NoError(t, err, "%s", out)
				assert.Contains(t, calls, "go build")
				assert.Contains(t, calls, "[GOOS=linux GOARCH="+tt.wantGOARCH+" CC="+tt.wantCC+"]")
				assert.Contains(t, calls, "version.Version=1.2.3")
			})
		}
	}
}

func TestRuntimeInstallsDCGMFromTheRepositoryOfItsArchitecture(t *testing.T) {
	_, stages := parseDockerfile(t, filepath.Join(e2etest.RepoRoot(), "Dockerfile"))
	rt := find(stages, "runtime")
	require.NotNil(t, rt)
	install := runWith(t, rt, "datacenter-gpu-manager-4-core")
	const (
		x86  = "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64 /\n"
		sbsa = "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/sbsa /\n"
	)
	tests := []struct {
		name, target, dpkgArch, sources, wantErr string
	}{
		{"amd64 from x86_64", "amd64", "", x86, ""},
		{"arm64 from sbsa", "arm64", "", sbsa, ""},
		{"a builder without TARGETARCH asks dpkg", "", "arm64", sbsa, ""},
		{"arm64 on a base image of the x86_64 repository", "arm64", "", x86, "no NVIDIA CUDA repository for sbsa"},
		{"amd64 on a base image of the sbsa repository", "amd64", "", sbsa, "no NVIDIA CUDA repository for x86_64"},
		{"another architecture is refused", "ppc64le", "", x86, "TARGETARCH=ppc64le: gpuscope's image is built for amd64 and arm64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"TARGETARCH": tt.target, "FAKE_DPKG_ARCH": tt.dpkgArch, "DCGM_VERSION": "4.5.3-1"}
			calls, out, err := stubbed(t, install, env, tt.sources)
			if tt.wantErr != "" {
				assert.Error(t, err)
				assert.Contains(t, out, tt.wantErr)
				assert.NotContains(t, calls, "apt-get", "nothing is installed")
				return
			}
			require.NoError(t, err, "%s", out)
			assert.Contains(t, calls, "datacenter-gpu-manager-4-core=1:4.5.3-1")
			assert.Contains(t, calls, "datacenter-gpu-manager-4-proprietary=1:4.5.3-1")
		})
	}
}
