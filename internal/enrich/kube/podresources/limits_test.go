package podresources

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// TestCountsAreNotBoundedOnlyBytesEveryLimit: an answer with one entry more
// than a limit allows is refused with a LimitError naming what it holds too
// much of; one at the limit is read. The DRA claims and their devices count
// as device entries, as device-plugin resources do.
func TestCountsAreNotBoundedOnlyBytesEveryLimit(t *testing.T) {
	answer := func(pods, containers, devices, ids int, name string) *podresourcesv1.ListPodResourcesResponse {
		r := &podresourcesv1.ListPodResourcesResponse{}
		for range pods {
			p := &podresourcesv1.PodResources{Name: name, Namespace: "ns"}
			for range containers {
				c := &podresourcesv1.ContainerResources{Name: "c"}
				for range devices {
					c.Devices = append(c.Devices, &podresourcesv1.ContainerDevices{ResourceName: "r", DeviceIds: make([]string, ids)})
				}
				p.Containers = append(p.Containers, c)
			}
			r.PodResources = append(r.PodResources, p)
		}
		return r
	}
	claims := func(n int) *podresourcesv1.ListPodResourcesResponse {
		c := &podresourcesv1.ContainerResources{Name: "c", DynamicResources: []*podresourcesv1.DynamicResource{{ClaimName: "claim"}}}
		for range n {
			c.DynamicResources[0].ClaimResources = append(c.DynamicResources[0].ClaimResources, &podresourcesv1.ClaimResource{DeviceName: "gpu-0"})
		}
		return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{Name: "p", Namespace: "ns",
			Containers: []*podresourcesv1.ContainerResources{c}}}}
	}
	lim := Limits{MaxPods: 4, MaxContainers: 8, MaxDevices: 8, MaxDeviceIDs: 16, MaxDecodedBytes: 4096}
	for _, tt := range []struct {
		name string
		m    *podresourcesv1.ListPodResourcesResponse
		what string // "" when it is read
	}{
		{"pods at the limit", answer(4, 0, 0, 0, "p"), ""},
		{"one pod more", answer(5, 0, 0, 0, "p"), "pods"},
		{"containers at the limit", answer(2, 4, 0, 0, "p"), ""},
		{"one container more", answer(3, 3, 0, 0, "p"), "containers"},
		{"one device entry more", answer(1, 3, 3, 0, "p"), "device entries"},
		{"one DRA device more", claims(8), "device entries"},
		{"device IDs at the limit", answer(1, 1, 2, 8, "p"), ""},
		{"one device ID more", answer(1, 1, 1, 17, "p"), "device IDs"},
		{"names past the decoded bytes", answer(2, 0, 0, 0, strings.Repeat("n", 2048)), "bytes once decoded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := proto.Marshal(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			_, err = decodeListWithin(b, lim)
			var le *LimitError
			switch {
			case tt.what == "" && err != nil:
				t.Fatalf("refused an answer within the limits: %v", err)
			case tt.what != "" && (!errors.As(err, &le) || le.What != tt.what):
				t.Fatalf("got %v, want a LimitError on %s", err, tt.what)
			case tt.what != "" && !strings.Contains(err.Error(), tt.what):
				t.Fatalf("%q does not name %s", err, tt.what)
			}
		})
	}
}
