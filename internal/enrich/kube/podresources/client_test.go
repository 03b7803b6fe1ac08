package podresources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
)

// socketPath is a unix socket path short enough for sun_path (108 bytes),
// which t.TempDir under a long TMPDIR may not be.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "podres")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "kubelet.sock")
}

// TestListFromTheKubeletsGRPCServer asks a real gRPC server, serving the
// kubelet's generated PodResources service, for its pods: device-plugin
// devices and DRA claims come back as the kubelet sent them.
func TestListFromTheKubeletsGRPCServer(t *testing.T) {
	pods := []kubelettest.Pod{
		{Name: "train-0", Namespace: "ml", Containers: []kubelettest.Container{
			{Name: "trainer", Devices: []kubelettest.Device{
				{Resource: "nvidia.com/gpu", IDs: []string{"GPU-0a", "GPU-1b"}},
				{Resource: "example.com/nic", IDs: []string{"nic0"}},
			}},
			{Name: "sidecar"},
		}},
		{Name: "infer", Namespace: "serve", Containers: []kubelettest.Container{
			{Name: "server", Claims: []kubelettest.Claim{{Name: "gpu-claim", Namespace: "serve", Devices: []kubelettest.ClaimDevice{
				{Driver: "gpu.nvidia.com", Pool: "node-1", Device: "gpu-3", CDI: []string{"nvidia.com/gpu=3"}},
			}}}},
		}},
	}
	srv, err := kubelettest.Start(socketPath(t), pods)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c := New(srv.Socket(), 1<<20)
	defer c.Close()
	got, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := &ListResponse{Pods: []Pod{
		{Name: "train-0", Namespace: "ml", Containers: []Container{
			{Name: "trainer", Devices: []Devices{
				{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{"GPU-0a", "GPU-1b"}},
				{ResourceName: "example.com/nic", DeviceIDs: []string{"nic0"}},
			}},
			{Name: "sidecar"},
		}},
		{Name: "infer", Namespace: "serve", Containers: []Container{
			{Name: "server", DynamicResources: []DynamicResource{{ClaimName: "gpu-claim", ClaimNamespace: "serve",
				ClaimResources: []ClaimResource{{DriverName: "gpu.nvidia.com", PoolName: "node-1", DeviceName: "gpu-3"}}}}},
		}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List answered\n%+v\nwant\n%+v", got, want)
	}
}

// TestListReusesOneConnectionAndRedialsAfterClose counts the connections a
// kubelet accepts: calls share one, and Close makes the next call dial
// again, as a kubelet restart needs.
func TestListReusesOneConnectionAndRedialsAfterClose(t *testing.T) {
	var accepted atomic.Int32
	sock := serveGRPC(t, &lister{resp: &podresourcesv1.ListPodResourcesResponse{}}, &accepted)
	c := New(sock, 1<<20)
	defer c.Close()
	for i := range 3 {
		if _, err := c.List(context.Background()); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("3 calls opened %d connections, want 1", n)
	}
	c.Close()
	if _, err := c.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := accepted.Load(); n != 2 {
		t.Fatalf("a call after Close: %d connections in all, want 2", n)
	}
}

// TestListErrors: every way a call can fail gives an error that says what
// happened, within the call's deadline.
func TestListErrors(t *testing.T) {
	big := &podresourcesv1.ListPodResourcesResponse{}
	for i := range 100 {
		big.PodResources = append(big.PodResources, &podresourcesv1.PodResources{Name: fmt.Sprintf("pod-%d", i), Namespace: "ns"})
	}
	tests := []struct {
		name  string
		sock  func(t *testing.T) string
		check func(t *testing.T, err error)
	}{
		{"status from the kubelet", func(t *testing.T) string {
			return serveGRPC(t, &lister{err: status.Error(codes.Unavailable, "shutting down: 100% done, ünïcode")}, nil)
		}, func(t *testing.T, err error) {
			var se *StatusError
			if !errors.As(err, &se) || se.Code != int(codes.Unavailable) || se.Message != "shutting down: 100% done, ünïcode" {
				t.Fatalf("got %v, want Unavailable with the message as sent", err)
			}
			if !strings.Contains(err.Error(), "code = Unavailable") {
				t.Fatalf("error %q does not name the code", err)
			}
		}},
		{"a kubelet without the method", func(t *testing.T) string {
			return serveGRPC(t, &podresourcesv1.UnimplementedPodResourcesListerServer{}, nil)
		}, func(t *testing.T, err error) {
			var se *StatusError
			if !errors.As(err, &se) || se.Code != int(codes.Unimplemented) {
				t.Fatalf("got %v, want Unimplemented", err)
			}
		}},
		{"answer over the limit", func(t *testing.T) string {
			return serveGRPC(t, &lister{resp: big}, nil)
		}, func(t *testing.T, err error) {
			var tl *TooLargeError
			if !errors.As(err, &tl) || tl.Limit != 512 || tl.Size <= 512 {
				t.Fatalf("got %v, want the answer's size and the 512-byte limit", err)
			}
		}},
		{"no socket", func(t *testing.T) string {
			return socketPath(t)
		}, func(t *testing.T, err error) {
			if !errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), "no such file") {
				t.Fatalf("got %v, want the missing socket", err)
			}
		}},
		{"an HTTP/1 server on the socket", func(t *testing.T) string {
			sock := socketPath(t)
			l := listen(t, sock)
			hs := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
			go func() { _ = hs.Serve(l) }()
			t.Cleanup(func() { _ = hs.Close() })
			return sock
		}, func(t *testing.T, err error) {
			if err == nil {
				t.Fatal("no error")
			}
		}},
		{"a message shorter than its prefix says", func(t *testing.T) string {
			return serveRaw(t, func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/grpc")
				_, _ = w.Write([]byte{0, 0, 0, 1, 0, 1, 2, 3})
			})
		}, func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "ended after 3 of its message's 256 bytes") {
				t.Fatalf("got %v, want the truncation", err)
			}
		}},
		{"a redirect", func(t *testing.T) string {
			return serveRaw(t, func(w http.ResponseWriter) {
				w.Header().Set("Location", "/elsewhere")
				w.WriteHeader(http.StatusTemporaryRedirect)
			})
		}, func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "HTTP 307") {
				t.Fatalf("got %v, want the redirect refused", err)
			}
		}},
		{"no status after the message", func(t *testing.T) string {
			return serveRaw(t, func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/grpc")
				_, _ = w.Write([]byte{0, 0, 0, 0, 0})
			})
		}, func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "without a gRPC status") {
				t.Fatalf("got %v, want the missing status", err)
			}
		}},
		{"a kubelet that never answers", func(t *testing.T) string {
			sock := socketPath(t)
			l := listen(t, sock)
			var mu sync.Mutex
			var conns []net.Conn
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
			}()
			t.Cleanup(func() {
				mu.Lock()
				defer mu.Unlock()
				for _, c := range conns {
					_ = c.Close()
				}
			})
			return sock
		}, func(t *testing.T, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want the deadline", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(tt.sock(t), 512)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			resp, err := c.List(ctx)
			if err == nil {
				t.Fatalf("List answered %+v, want an error", resp)
			}
			tt.check(t, err)
		})
	}
}

// TestListSendsItsDeadline: the kubelet learns the call's deadline, so it
// can give up on its side too.
func TestListSendsItsDeadline(t *testing.T) {
	l := &lister{resp: &podresourcesv1.ListPodResourcesResponse{}}
	c := New(serveGRPC(t, l, nil), 1<<20)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Second)
	defer cancel()
	if _, err := c.List(ctx); err != nil {
		t.Fatal(err)
	}
	left := l.deadline()
	if left <= 5*time.Second || left > 7*time.Second {
		t.Fatalf("the server saw %v left of a 7s deadline", left)
	}
}

func TestGRPCTimeout(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "1m"}, {-time.Second, "1m"}, {1500 * time.Microsecond, "1m"}, {10 * time.Second, "10000m"},
		{99999999 * time.Millisecond, "99999999m"}, {100000 * time.Second, "100000S"}, {1 << 62, "99999999S"},
	} {
		if got := grpcTimeout(tt.d); got != tt.want {
			t.Errorf("grpcTimeout(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// lister answers List with resp or err and records the deadline it saw.
type lister struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	resp *podresourcesv1.ListPodResourcesResponse
	err  error
	mu   sync.Mutex
	left time.Duration
}

func (l *lister) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	if dl, ok := ctx.Deadline(); ok {
		l.mu.Lock()
		l.left = time.Until(dl)
		l.mu.Unlock()
	}
	return l.resp, l.err
}

func (l *lister) deadline() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.left
}

// serveGRPC serves impl with gRPC-go on a new socket until the test ends,
// counting accepted connections in accepted when it is not nil.
func serveGRPC(t *testing.T, impl podresourcesv1.PodResourcesListerServer, accepted *atomic.Int32) string {
	t.Helper()
	sock := socketPath(t)
	var l net.Listener = listen(t, sock)
	if accepted != nil {
		l = countingListener{l, accepted}
	}
	g := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(g, impl)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(l) }()
	t.Cleanup(func() { g.Stop(); <-done })
	return sock
}

// serveRaw serves every request with answer over HTTP/2 without TLS, as
// a gRPC server would but with whatever framing the test writes.
func serveRaw(t *testing.T, answer func(w http.ResponseWriter)) string {
	t.Helper()
	sock := socketPath(t)
	l := listen(t, sock)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hs := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { answer(w) }),
		Protocols:         &p,
		ReadHeaderTimeout: time.Second,
	}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	return sock
}

func listen(t *testing.T, sock string) net.Listener {
	t.Helper()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
