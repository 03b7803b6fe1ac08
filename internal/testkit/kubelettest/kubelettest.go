// Package kubelettest serves the kubelet PodResources API (v1) on a unix
// socket with a scripted pod list, for tests and end-to-end runs without a
// cluster.
package kubelettest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Device is one resource allocation of a container.
type Device struct {
	Resource string   `json:"resource"`
	IDs      []string `json:"ids"`
}

// Claim is one DRA ResourceClaim a container uses, with the devices the
// kubelet lists for it (PodResources v1 DynamicResource).
type Claim struct {
	Name      string        `json:"name"`
	Namespace string        `json:"namespace"`
	Devices   []ClaimDevice `json:"devices"`
}

// ClaimDevice is one allocated device of a claim (ClaimResource): the
// driver, pool and device triplet names it; CDI names the CDI devices.
type ClaimDevice struct {
	Driver string   `json:"driver"`
	Pool   string   `json:"pool"`
	Device string   `json:"device"`
	CDI    []string `json:"cdi,omitempty"`
}

// Container is one container of a pod.
type Container struct {
	Name    string   `json:"name"`
	Devices []Device `json:"devices"`
	Claims  []Claim  `json:"claims,omitempty"`
}

// Pod is one pod as the kubelet lists it.
type Pod struct {
	Name       string      `json:"name"`
	Namespace  string      `json:"namespace"`
	Containers []Container `json:"containers"`
}

// LoadPods reads a JSON array of pods.
func LoadPods(path string) ([]Pod, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pod list: %w", err)
	}
	var pods []Pod
	if err := json.Unmarshal(b, &pods); err != nil {
		return nil, fmt.Errorf("pod list %s: %w", path, err)
	}
	return pods, nil
}

// Server is a fake kubelet PodResources server.
type Server struct {
	podresourcesv1.UnimplementedPodResourcesListerServer

	socket string

	mu    sync.Mutex
	resp  *podresourcesv1.ListPodResourcesResponse
	calls int
	grpc  *grpc.Server
	done  chan struct{}
}

// Start serves pods on socket until Stop.
func Start(socket string, pods []Pod) (*Server, error) {
	s := &Server{socket: socket}
	s.SetPods(pods)
	if err := s.listen(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) listen() error {
	_ = os.Remove(s.socket)
	l, err := net.Listen("unix", s.socket)
	if err != nil {
		return fmt.Errorf("fake kubelet: listen on %s: %w", s.socket, err)
	}
	// Large enough to send the answers the tests need (10,000 pods).
	g := grpc.NewServer(grpc.MaxSendMsgSize(256 << 20))
	podresourcesv1.RegisterPodResourcesListerServer(g, s)
	done := make(chan struct{})
	s.mu.Lock()
	s.grpc, s.done = g, done
	s.mu.Unlock()
	go func() {
		defer close(done)
		if err := g.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			fmt.Fprintf(os.Stderr, "fake kubelet: serve: %v\n", err)
		}
	}()
	return nil
}

// Socket is the path the server listens on.
func (s *Server) Socket() string { return s.socket }

// SetPods replaces the pod list served from now on.
func (s *Server) SetPods(pods []Pod) {
	s.SetResponse(ToResponse(pods))
}

// SetResponse serves a raw answer, for malformed cases.
func (s *Server) SetResponse(r *podresourcesv1.ListPodResourcesResponse) {
	s.mu.Lock()
	s.resp = r
	s.mu.Unlock()
}

// Calls is the number of List calls answered.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Stop stops serving and removes the socket, as a kubelet going away does.
func (s *Server) Stop() {
	s.mu.Lock()
	g, done := s.grpc, s.done
	s.grpc = nil
	s.mu.Unlock()
	if g == nil {
		return
	}
	g.Stop()
	<-done
	_ = os.Remove(s.socket)
}

// Restart stops the server and serves again on a new socket file, as a
// kubelet restart does.
func (s *Server) Restart() error {
	s.Stop()
	return s.listen()
}

// List implements the PodResources API.
func (s *Server) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.resp, nil
}

// ToResponse converts pods to the API's answer.
func ToResponse(pods []Pod) *podresourcesv1.ListPodResourcesResponse {
	r := &podresourcesv1.ListPodResourcesResponse{}
	for _, p := range pods {
		pr := &podresourcesv1.PodResources{Name: p.Name, Namespace: p.Namespace}
		for _, c := range p.Containers {
			cr := &podresourcesv1.ContainerResources{Name: c.Name}
			for _, d := range c.Devices {
				cr.Devices = append(cr.Devices, &podresourcesv1.ContainerDevices{
					ResourceName: d.Resource, DeviceIds: d.IDs,
				})
			}
			for _, cl := range c.Claims {
				dr := &podresourcesv1.DynamicResource{ClaimName: cl.Name, ClaimNamespace: cl.Namespace}
				for _, d := range cl.Devices {
					res := &podresourcesv1.ClaimResource{DriverName: d.Driver, PoolName: d.Pool, DeviceName: d.Device}
					for _, name := range d.CDI {
						res.CdiDevices = append(res.CdiDevices, &podresourcesv1.CDIDevice{Name: name})
					}
					dr.ClaimResources = append(dr.ClaimResources, res)
				}
				cr.DynamicResources = append(cr.DynamicResources, dr)
			}
			pr.Containers = append(pr.Containers, cr)
		}
		r.PodResources = append(r.PodResources, pr)
	}
	return r
}
