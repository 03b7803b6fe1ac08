package podresources

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// ListResponse is the kubelet's answer to List (ListPodResourcesResponse)
// with the fields gpuscope reads; the others (CPU IDs, memory, topology)
// are skipped.
type ListResponse struct {
	Pods []Pod // field 1, pod_resources
}

// Pod is one pod's resources (PodResources).
type Pod struct {
	Name       string      // field 1
	Namespace  string      // field 2
	Containers []Container // field 3
}

// Container is one container's resources (ContainerResources).
type Container struct {
	Name             string            // field 1
	Devices          []Devices         // field 2
	DynamicResources []DynamicResource // field 5
}

// Devices are the devices of one resource a container holds through a
// device plugin (ContainerDevices).
type Devices struct {
	ResourceName string   // field 1
	DeviceIDs    []string // field 2
}

// DynamicResource is one DRA claim a container uses (DynamicResource).
type DynamicResource struct {
	ClaimName      string          // field 2
	ClaimNamespace string          // field 3
	ClaimResources []ClaimResource // field 4
}

// ClaimResource is one device allocated to a claim (ClaimResource).
type ClaimResource struct {
	DriverName string // field 2
	PoolName   string // field 3
	DeviceName string // field 4
}

// fieldFunc reads one length-delimited field of a message.
type fieldFunc func(num protowire.Number, v []byte) error

// walk calls f for each length-delimited field of the message b. Every
// field gpuscope reads is a string or a nested message; a field of another
// wire type is skipped, whatever its number, as protobuf-go keeps a known
// field of the wrong wire type as an unknown one.
func walk(b []byte, f fieldFunc) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		if err := f(num, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// str reads a string field, which proto3 requires to be UTF-8, and counts
// its bytes against the budget.
func (bud *budget) str(msg, name string, num protowire.Number, v []byte) (string, error) {
	if !utf8.Valid(v) {
		return "", fmt.Errorf("%s.%s (field %d) is not valid UTF-8", msg, name, num)
	}
	if err := bud.bytes(len(v)); err != nil {
		return "", err
	}
	return string(v), nil
}

// sub appends the nested message v, read by dec, to *list; an error names
// the field. A limit reached is returned as it is: it says what the answer
// holds too much of.
func sub[T any](list *[]T, msg, name string, v []byte, dec func([]byte) (T, error)) error {
	m, err := dec(v)
	if err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			return err
		}
		return fmt.Errorf("%s.%s: %w", msg, name, err)
	}
	*list = append(*list, m)
	return nil
}

// The decoders below read the fields gpuscope uses and skip the others, as
// a protobuf decoder skips unknown fields. Each counts its entries and
// strings against the budget before it makes them.

// decodeList decodes an answer within DefaultLimits.
func decodeList(b []byte) (*ListResponse, error) {
	return decodeListWithin(b, DefaultLimits)
}

func decodeListWithin(b []byte, lim Limits) (*ListResponse, error) {
	bud := &budget{lim: lim.withDefaults()}
	r := &ListResponse{}
	err := walk(b, func(num protowire.Number, v []byte) error {
		if num != 1 {
			return nil
		}
		if err := bud.take(&bud.pods, bud.lim.MaxPods, "pods", podSize); err != nil {
			return err
		}
		return sub(&r.Pods, "ListPodResourcesResponse", "pod_resources", v, bud.decodePod)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (bud *budget) decodePod(b []byte) (Pod, error) {
	const m = "PodResources"
	var p Pod
	err := walk(b, func(num protowire.Number, v []byte) (err error) {
		switch num {
		case 1:
			p.Name, err = bud.str(m, "name", num, v)
		case 2:
			p.Namespace, err = bud.str(m, "namespace", num, v)
		case 3:
			if err = bud.take(&bud.containers, bud.lim.MaxContainers, "containers", containerSize); err == nil {
				err = sub(&p.Containers, m, "containers", v, bud.decodeContainer)
			}
		}
		return err
	})
	return p, err
}

func (bud *budget) decodeContainer(b []byte) (Container, error) {
	const m = "ContainerResources"
	var c Container
	err := walk(b, func(num protowire.Number, v []byte) (err error) {
		switch num {
		case 1:
			c.Name, err = bud.str(m, "name", num, v)
		case 2:
			if err = bud.take(&bud.devices, bud.lim.MaxDevices, "device entries", devicesSize); err == nil {
				err = sub(&c.Devices, m, "devices", v, bud.decodeDevices)
			}
		case 5:
			if err = bud.take(&bud.devices, bud.lim.MaxDevices, "device entries", dynamicSize); err == nil {
				err = sub(&c.DynamicResources, m, "dynamic_resources", v, bud.decodeDynamic)
			}
		}
		return err
	})
	return c, err
}

func (bud *budget) decodeDevices(b []byte) (Devices, error) {
	const m = "ContainerDevices"
	var d Devices
	err := walk(b, func(num protowire.Number, v []byte) (err error) {
		switch num {
		case 1:
			d.ResourceName, err = bud.str(m, "resource_name", num, v)
		case 2:
			if err = bud.take(&bud.ids, bud.lim.MaxDeviceIDs, "device IDs", idSize); err != nil {
				return err
			}
			var id string
			id, err = bud.str(m, "device_ids", num, v)
			d.DeviceIDs = append(d.DeviceIDs, id)
		}
		return err
	})
	return d, err
}

func (bud *budget) decodeDynamic(b []byte) (DynamicResource, error) {
	const m = "DynamicResource"
	var dr DynamicResource
	err := walk(b, func(num protowire.Number, v []byte) (err error) {
		switch num {
		case 2:
			dr.ClaimName, err = bud.str(m, "claim_name", num, v)
		case 3:
			dr.ClaimNamespace, err = bud.str(m, "claim_namespace", num, v)
		case 4:
			if err = bud.take(&bud.devices, bud.lim.MaxDevices, "device entries", claimSize); err == nil {
				err = sub(&dr.ClaimResources, m, "claim_resources", v, bud.decodeClaim)
			}
		}
		return err
	})
	return dr, err
}

func (bud *budget) decodeClaim(b []byte) (ClaimResource, error) {
	const m = "ClaimResource"
	var cr ClaimResource
	err := walk(b, func(num protowire.Number, v []byte) (err error) {
		switch num {
		case 2:
			cr.DriverName, err = bud.str(m, "driver_name", num, v)
		case 3:
			cr.PoolName, err = bud.str(m, "pool_name", num, v)
		case 4:
			cr.DeviceName, err = bud.str(m, "device_name", num, v)
		}
		return err
	})
	return cr, err
}
