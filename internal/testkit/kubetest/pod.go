package kubetest

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ServiceAccountDir is where a pod finds its service account's token, CA
// and namespace; in-cluster clients read these paths and no others.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// inPodScript mounts the folder $1 at ServiceAccountDir in a private mount
// namespace (over a fresh tmpfs on /run, so that nothing of the machine's
// is changed or hidden from anyone else) and runs the rest of the
// arguments there, in the same process.
const inPodScript = `set -e
run=$(readlink -f /var/run)
mount -t tmpfs -o size=1m,mode=755 gpuscope-test "$run"
mkdir -p "$run/secrets/kubernetes.io/serviceaccount"
mount --bind "$1" "$run/secrets/kubernetes.io/serviceaccount"
shift
exec "$@"`

// PodView is what a process in a pod of the control plane's cluster sees of
// the API server: the service-account files and the service variables.
type PodView struct {
	// Dir holds token, ca.crt and namespace, as the kubelet mounts them.
	Dir string
	cp  *ControlPlane
}

// NewPodView writes the files a pod of namespace with token sees into a
// new folder of the test's.
func (c *ControlPlane) NewPodView(t testing.TB, namespace, token string) *PodView {
	t.Helper()
	dir := t.TempDir()
	ca, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"token": []byte(token), "ca.crt": ca, "namespace": []byte(namespace)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &PodView{Dir: dir, cp: c}
}

// Command returns the command line that runs bin with args as in the pod:
// in a private mount namespace where Dir is at ServiceAccountDir, with
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT naming the API
// server. The command execs bin, so its PID is bin's. The test is skipped
// where mount namespaces cannot be made (not root, or no CAP_SYS_ADMIN),
// and fails there under CI=true.
func (v *PodView) Command(t testing.TB, bin string, args ...string) (string, []string) {
	t.Helper()
	requireMountNamespaces(t)
	u, err := url.Parse(v.cp.URL)
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"--mount", "--propagation", "private", "sh", "-c", inPodScript, "sh", v.Dir,
		"env", "KUBERNETES_SERVICE_HOST=" + u.Hostname(), "KUBERNETES_SERVICE_PORT=" + u.Port(), bin}
	return "unshare", append(argv, args...)
}

func requireMountNamespaces(t testing.TB) {
	t.Helper()
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs gpuscope-test "$(readlink -f /var/run)"`).CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("cannot run a process with a pod's view of the service-account files: unshare --mount: %v: %s",
		err, strings.TrimSpace(string(out)))
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
