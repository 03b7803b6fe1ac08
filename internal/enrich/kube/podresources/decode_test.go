package podresources

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// fromGenerated is what decodeList must give for a message of the
// kubelet's generated types: the fields gpuscope reads.
func fromGenerated(m *podresourcesv1.ListPodResourcesResponse) *ListResponse {
	r := &ListResponse{}
	for _, p := range m.GetPodResources() {
		pod := Pod{Name: p.GetName(), Namespace: p.GetNamespace()}
		for _, c := range p.GetContainers() {
			cont := Container{Name: c.GetName()}
			for _, d := range c.GetDevices() {
				cont.Devices = append(cont.Devices, Devices{ResourceName: d.GetResourceName(), DeviceIDs: d.GetDeviceIds()})
			}
			for _, dr := range c.GetDynamicResources() {
				dyn := DynamicResource{ClaimName: dr.GetClaimName(), ClaimNamespace: dr.GetClaimNamespace()}
				for _, cr := range dr.GetClaimResources() {
					dyn.ClaimResources = append(dyn.ClaimResources, ClaimResource{
						DriverName: cr.GetDriverName(), PoolName: cr.GetPoolName(), DeviceName: cr.GetDeviceName()})
				}
				cont.DynamicResources = append(cont.DynamicResources, dyn)
			}
			pod.Containers = append(pod.Containers, cont)
		}
		r.Pods = append(r.Pods, pod)
	}
	return r
}

// randomAnswer is a kubelet answer with every field of the API set at
// random, the ones gpuscope skips (CPU IDs, memory, topology, CDI devices,
// share IDs) included.
func randomAnswer(r *rand.Rand) *podresourcesv1.ListPodResourcesResponse {
	s := func() string {
		b := make([]rune, r.IntN(12))
		for i := range b {
			b[i] = []rune("abcxyz-./09GPUé世")[r.IntN(16)]
		}
		return string(b)
	}
	topo := func() *podresourcesv1.TopologyInfo {
		return &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: r.Int64N(4)}}}
	}
	mem := func() []*podresourcesv1.ContainerMemory {
		return []*podresourcesv1.ContainerMemory{{MemoryType: s(), Size: r.Uint64(), Topology: topo()}}
	}
	m := &podresourcesv1.ListPodResourcesResponse{}
	for range r.IntN(4) {
		p := &podresourcesv1.PodResources{Name: s(), Namespace: s(), CpuIds: []int64{r.Int64N(64)}, Memory: mem()}
		for range r.IntN(3) {
			c := &podresourcesv1.ContainerResources{Name: s(), CpuIds: []int64{1, 2}, Memory: mem()}
			for range r.IntN(3) {
				c.Devices = append(c.Devices, &podresourcesv1.ContainerDevices{ResourceName: s(), DeviceIds: []string{s(), s()}, Topology: topo()})
			}
			for range r.IntN(2) {
				dr := &podresourcesv1.DynamicResource{ClaimName: s(), ClaimNamespace: s()}
				for range r.IntN(3) {
					share := s()
					dr.ClaimResources = append(dr.ClaimResources, &podresourcesv1.ClaimResource{
						CdiDevices: []*podresourcesv1.CDIDevice{{Name: s()}}, DriverName: s(), PoolName: s(), DeviceName: s(), ShareId: &share})
				}
				c.DynamicResources = append(c.DynamicResources, dr)
			}
			p.Containers = append(p.Containers, c)
		}
		m.PodResources = append(m.PodResources, p)
	}
	return m
}

// TestDecodeListEqualsProtobufGo decodes random answers marshalled by
// protobuf-go from the kubelet's generated types: every field gpuscope
// reads comes back, the others are skipped.
func TestDecodeListEqualsProtobufGo(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		m := randomAnswer(r)
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeList(b)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if want := fromGenerated(m); !reflect.DeepEqual(got, want) {
			t.Fatalf("answer %d decoded to\n%+v\nwant\n%+v", i, got, want)
		}
	}
}

// TestDecodeListRefusesWhatProtobufGoRefuses: malformed answers give an
// error that names the field, where protobuf-go refuses them too.
func TestDecodeListRefusesWhatProtobufGoRefuses(t *testing.T) {
	tag := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	pod := func(fields ...[]byte) []byte {
		var p []byte
		for _, f := range fields {
			p = append(p, f...)
		}
		return tag(nil, 1, p)
	}
	good := pod(tag(nil, 1, []byte("p")), tag(nil, 2, []byte("ns")))
	tests := []struct {
		name, want string
		b          []byte
	}{
		{"truncated", "field 1: unexpected EOF", good[:len(good)-1]},
		{"length past the end", "field 1: unexpected EOF", append([]byte{0x0a, 0x7f}, good...)},
		{"pod name not UTF-8", "PodResources.name (field 1) is not valid UTF-8", pod(tag(nil, 1, []byte("p\xff")))},
		{"device ID not UTF-8", "ListPodResourcesResponse.pod_resources: PodResources.containers: ContainerResources.devices: ContainerDevices.device_ids (field 2) is not valid UTF-8",
			pod(tag(nil, 3, tag(nil, 2, tag(nil, 2, []byte("GPU-\xc3")))))},
		{"bad tag", "invalid field number", []byte{0x02, 0x00}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := proto.Unmarshal(tt.b, &podresourcesv1.ListPodResourcesResponse{}); err == nil {
				t.Fatal("protobuf-go accepts the case; it does not test a refusal")
			}
			_, err := decodeList(tt.b)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestDecodeListSkipsAKnownFieldOfAnotherWireType: protobuf-go keeps such a
// field as an unknown one, and the earlier value of the field stays.
func TestDecodeListSkipsAKnownFieldOfAnotherWireType(t *testing.T) {
	var p []byte
	p = protowire.AppendBytes(protowire.AppendTag(p, 1, protowire.BytesType), []byte("train"))
	p = protowire.AppendVarint(protowire.AppendTag(p, 1, protowire.VarintType), 7)
	b := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), p)
	var m podresourcesv1.ListPodResourcesResponse
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	got, err := decodeList(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := fromGenerated(&m); !reflect.DeepEqual(got, want) || got.Pods[0].Name != "train" {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// FuzzDecodeList compares the decoder with protobuf-go on arbitrary bytes:
// whatever protobuf-go reads into the kubelet's types, decodeList reads
// too, with the same values, unless it holds more than the limits allow;
// and it never panics.
func FuzzDecodeList(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		b, err := proto.Marshal(randomAnswer(r))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x03, 0x0a, 0x01, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeList(b)
		var m podresourcesv1.ListPodResourcesResponse
		if perr := proto.Unmarshal(b, &m); perr != nil {
			return
		}
		var le *LimitError
		if errors.As(err, &le) {
			return // more than a node runs: refused on purpose
		}
		if err != nil {
			t.Fatalf("protobuf-go reads the answer, decodeList says %v", err)
		}
		if want := fromGenerated(&m); !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded\n%+v\nprotobuf-go\n%+v", got, want)
		}
	})
}

func BenchmarkDecodeList(b *testing.B) {
	m := &podresourcesv1.ListPodResourcesResponse{}
	for i := range 1000 {
		m.PodResources = append(m.PodResources, &podresourcesv1.PodResources{Name: fmt.Sprintf("pod-%d", i), Namespace: "ns",
			Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: []*podresourcesv1.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{fmt.Sprintf("GPU-%d", i%8)}}}}}})
	}
	buf, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("gpuscope", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeList(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protobuf-go", func(b *testing.B) {
		for b.Loop() {
			if err := proto.Unmarshal(buf, &podresourcesv1.ListPodResourcesResponse{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
