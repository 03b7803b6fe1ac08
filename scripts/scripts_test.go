// Package scripts holds tests of the shell scripts beside it.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stub writes an executable that records its name and arguments to log.
func stub(t *testing.T, dir, name, body string) {
	t.Helper()
	script := "#!/bin/bash\necho \"" + name + " $*\" >> \"$STUB_LOG\"\n" + body + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755))
}

// TestInstallTestDepsEndsOnlyWhatItStarted runs install-test-deps.sh on a
// machine without Prometheus, with apt-get and every tool that ends processes
// by name or stops services (testdata/process-enders.txt) replaced by
// recorders: installing the package must not end or stop any
// process, and the policy-rc.d hook that keeps the package's service from
// starting is there during the install and gone afterwards.
func TestInstallTestDepsEndsOnlyWhatItStarted(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	for _, tool := range []string{"bash", "sh", "env", "dirname", "printf", "chmod", "rm", "cat", "test", "setsid"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			continue
		}
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	policy := filepath.Join(dir, "policy-rc.d")
	log := filepath.Join(dir, "calls.log")
	stub(t, bin, "id", "echo 0")
	// apt-get install "installs" prometheus and promtool, and notes whether
	// the hook forbade starting services at that moment.
	stub(t, bin, "apt-get", `case "$*" in *install*)
  [ -x "$POLICY_RC_D" ] && "$POLICY_RC_D"; echo "policy-rc.d exit $?" >> "$STUB_LOG"
  printf '#!/bin/sh\n' > "$STUB_BIN/prometheus"; chmod 755 "$STUB_BIN/prometheus"
  printf '#!/bin/sh\n' > "$STUB_BIN/promtool"; chmod 755 "$STUB_BIN/promtool";;
esac`)
	enders := processEnders(t)
	for _, name := range enders {
		stub(t, bin, name, "exit 0")
	}
	scripts := filepath.Join(dir, "scripts")
	require.NoError(t, os.Mkdir(scripts, 0o755))
	body, err := os.ReadFile("install-test-deps.sh")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(scripts, "install-test-deps.sh"), body, 0o755))
	for _, name := range []string{"install-helm.sh", "build-prometheus.sh", "build-etcd.sh", "build-kube-apiserver.sh",
		"fetch-prometheus-operator-crds.sh", "fetch-libnvidia-ml.sh"} {
		require.NoError(t, os.WriteFile(filepath.Join(scripts, name), []byte("#!/bin/bash\n"), 0o755))
	}
	stub(t, scripts, "build-test-tools.sh", "")

	cmd := exec.Command(bash, filepath.Join(scripts, "install-test-deps.sh"))
	cmd.Env = []string{"PATH=" + bin, "STUB_LOG=" + log, "STUB_BIN=" + bin, "POLICY_RC_D=" + policy}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	calls, err := os.ReadFile(log)
	require.NoError(t, err)
	got := string(calls)
	assert.Regexp(t, `(?m)^apt-get .*install .*prometheus`, got, "the package is installed")
	assert.Contains(t, got, "build-test-tools.sh", "the Go tools are built")
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		for _, ender := range enders {
			assert.False(t, line == ender || strings.HasPrefix(line, ender+" "), "the script ran %q: it must end only what it started", line)
		}
	}
	assert.Contains(t, got, "policy-rc.d exit 101", "services are forbidden to start while the package installs")
	assert.NoFileExists(t, policy, "the hook the script added is removed")
}

// processEnders lists the tools the script must not call, one a line.
func processEnders(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "process-enders.txt"))
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	require.NotEmpty(t, out)
	return out
}
