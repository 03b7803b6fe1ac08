// Package kubetest runs a real Kubernetes control plane for tests: etcd and
// kube-apiserver (built from tools/ by scripts/build-etcd.sh and
// scripts/build-kube-apiserver.sh) on free loopback ports, with generated
// certificates, a static admin token, RBAC authorization and
// service-account token signing. No kubelet, scheduler or controller
// manager runs: pods are API objects, and service-account tokens come from
// the TokenRequest API. Processes are stopped by their PID.
package kubetest

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// Options configures a control plane; zero values take the defaults.
type Options struct {
	// EtcdBin and APIServerBin are the binaries; empty: Binaries finds them.
	EtcdBin, APIServerBin string
	// ServiceAccountKey signs the service-account tokens; nil: a new key.
	ServiceAccountKey crypto.Signer
	// ExtraAPIServerArgs are appended to the API server's arguments.
	ExtraAPIServerArgs []string
	// Dir keeps the data, certificates and logs; empty: a new temporary
	// folder, removed by Stop.
	Dir string
}

// ControlPlane is a running etcd and kube-apiserver.
type ControlPlane struct {
	// URL is the API server's base URL (https://127.0.0.1:PORT).
	URL string
	// CAFile is the CA bundle that verifies the API server.
	CAFile string
	// AdminToken authenticates as a member of system:masters.
	AdminToken string
	// Kubeconfig is a kubeconfig file for AdminToken (helm, kubectl).
	Kubeconfig string
	// EtcdURL is etcd's client URL.
	EtcdURL string

	dir, removeDir string
	pki            pki
	opts           Options
	port           int
	etcdArgs       []string

	mu        sync.Mutex
	etcd, api *proc
}

// readyTimeout bounds each wait for a server to be ready: the API server
// answers /readyz in about 4 s on an idle machine, much later on a loaded
// one.
const readyTimeout = 2 * time.Minute

// Start starts etcd and the API server and waits until /readyz answers.
func Start(opts Options) (*ControlPlane, error) {
	if opts.EtcdBin == "" || opts.APIServerBin == "" {
		etcd, api, err := Binaries()
		if err != nil {
			return nil, err
		}
		opts.EtcdBin, opts.APIServerBin = etcd, api
	}
	c := &ControlPlane{opts: opts, dir: opts.Dir, AdminToken: randomToken()}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "kubetest-")
		if err != nil {
			return nil, err
		}
		c.dir, c.removeDir = d, d
	}
	if err := c.start(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *ControlPlane) start() error {
	var err error
	if c.pki, err = writePKI(c.dir, c.opts.ServiceAccountKey); err != nil {
		return err
	}
	c.CAFile = c.pki.caFile
	// token,user,uid,"groups": the admin is a member of system:masters,
	// which RBAC's bootstrap policy lets do everything.
	tokens := filepath.Join(c.dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(c.AdminToken+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	c.port = ports[2]
	c.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	c.etcdArgs = []string{"--name=kubetest", "--data-dir=" + filepath.Join(c.dir, "etcd"),
		"--listen-client-urls=" + c.EtcdURL, "--advertise-client-urls=" + c.EtcdURL,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer, "--initial-cluster=kubetest=" + peer,
		"--log-level=warn", "--unsafe-no-fsync"}
	c.URL = "https://127.0.0.1:" + strconv.Itoa(c.port)
	if err := c.writeKubeconfig(); err != nil {
		return err
	}
	if err := c.StartEtcd(); err != nil {
		return err
	}
	return c.StartAPIServer()
}

// apiServerArgs are kube-apiserver's arguments. --endpoint-reconciler-type
// =none: the default reconciler refuses a loopback advertise address.
func (c *ControlPlane) apiServerArgs() []string {
	args := []string{
		"--etcd-servers=" + c.EtcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.port),
		"--tls-cert-file=" + c.pki.certFile, "--tls-private-key-file=" + c.pki.keyFile,
		"--token-auth-file=" + filepath.Join(c.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki.saPublicFile,
		"--service-account-signing-key-file=" + c.pki.saKeyFile,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(c.dir, "certs"),
		"--profiling=false",
		"--shutdown-delay-duration=0s",
	}
	return append(args, c.opts.ExtraAPIServerArgs...)
}

// StartEtcd starts etcd (again, after StopEtcd) on its ports and data
// folder, and waits until it is healthy.
func (c *ControlPlane) StartEtcd() error {
	p, err := startProc(c.opts.EtcdBin, filepath.Join(c.dir, "etcd.log"), c.etcdArgs...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.etcd = p
	c.mu.Unlock()
	ok := testwait.Every(readyTimeout, 50*time.Millisecond, func() bool {
		return p.running() && httpOK(http.DefaultClient, c.EtcdURL+"/health")
	})
	if !ok {
		return fmt.Errorf("etcd did not become healthy within %s:\n%s", readyTimeout, p.tail())
	}
	return nil
}

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on its
// port, and waits until /readyz answers 200.
func (c *ControlPlane) StartAPIServer() error {
	p, err := startProc(c.opts.APIServerBin, filepath.Join(c.dir, "kube-apiserver.log"), c.apiServerArgs()...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.api = p
	c.mu.Unlock()
	admin, err := c.Admin()
	if err != nil {
		return err
	}
	var last error
	ok := testwait.Every(readyTimeout, 100*time.Millisecond, func() bool {
		if !p.running() {
			return true
		}
		_, last = admin.Do(context.Background(), http.MethodGet, "/readyz", nil, nil)
		return last == nil
	})
	switch {
	case !p.running():
		return fmt.Errorf("kube-apiserver exited: %s:\n%s", p.exitErr(), p.tail())
	case !ok:
		return fmt.Errorf("kube-apiserver: /readyz not ready within %s: %v:\n%s", readyTimeout, last, p.tail())
	}
	return nil
}

// StopAPIServer stops the API server by its PID (SIGTERM, then SIGKILL).
func (c *ControlPlane) StopAPIServer() { c.stop(&c.api) }

// StopEtcd stops etcd by its PID.
func (c *ControlPlane) StopEtcd() { c.stop(&c.etcd) }

func (c *ControlPlane) stop(p **proc) {
	c.mu.Lock()
	q := *p
	*p = nil
	c.mu.Unlock()
	if q != nil {
		q.stop()
	}
}

// Stop stops the API server and etcd, and removes the folder Start made.
func (c *ControlPlane) Stop() {
	c.StopAPIServer()
	c.StopEtcd()
	if c.removeDir != "" {
		_ = os.RemoveAll(c.removeDir)
	}
}

// Logs is the end of both servers' output, for a failing test.
func (c *ControlPlane) Logs() string {
	var b strings.Builder
	for _, name := range []string{"etcd.log", "kube-apiserver.log"} {
		out, _ := os.ReadFile(filepath.Join(c.dir, name))
		fmt.Fprintf(&b, "== %s\n%s\n", name, tailOf(string(out), 4000))
	}
	return b.String()
}

// Admin is a client with the admin token.
func (c *ControlPlane) Admin() (*Client, error) { return c.Client(c.AdminToken) }

// Client is a client that authenticates with token.
func (c *ControlPlane) Client(token string) (*Client, error) {
	return newClient(c.URL, c.CAFile, token)
}

func (c *ControlPlane) writeKubeconfig() error {
	c.Kubeconfig = filepath.Join(c.dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, c.URL, c.CAFile, c.AdminToken)
	return os.WriteFile(c.Kubeconfig, []byte(kc), 0o600)
}

// freePorts finds n free loopback ports, holding each until all are found
// so that none is given twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func httpOK(client *http.Client, url string) bool {
	resp, err := client.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// proc is a started server whose output goes to a log file.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProc(bin, logFile string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) exitErr() error {
	<-p.done
	if p.err == nil {
		return errors.New("exit status 0")
	}
	return p.err
}

// stop sends SIGTERM to the process's PID, and SIGKILL to it if it has not
// exited after 30 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	return tailOf(string(b), 4000)
}

func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
