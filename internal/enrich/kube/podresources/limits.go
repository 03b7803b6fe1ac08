package podresources

import (
	"fmt"
	"unsafe"
)

// Limits bound what one answer of the kubelet may hold, far above what a
// node runs (a few hundred pods, tens of containers each, a few hundred
// devices) and far below what a broken or hostile kubelet can send within
// the message size: an 8 MiB answer of four million empty containers
// decodes to more than a gigabyte. Zero fields take DefaultLimits'.
type Limits struct {
	// MaxMessageBytes bounds the answer on the wire.
	MaxMessageBytes int
	// MaxPods, MaxContainers, MaxDevices and MaxDeviceIDs bound the
	// entries of an answer: pods, containers over all pods, device entries
	// (device-plugin resources, DRA claims and their devices) and device
	// IDs.
	MaxPods, MaxContainers, MaxDevices, MaxDeviceIDs int
	// MaxDecodedBytes bounds the memory the decoded answer takes: its
	// entries and the strings they hold.
	MaxDecodedBytes int
	// MaxControlFrames bounds the frames other than headers and data (PING,
	// SETTINGS, WINDOW_UPDATE, ...) and the empty data frames the kubelet
	// may send on a connection between the starts of two calls: a call
	// needs a handful. Past it the connection is dropped.
	MaxControlFrames int
}

// DefaultLimits are the limits of a client whose options leave them at 0.
var DefaultLimits = Limits{
	MaxMessageBytes:  64 << 20,
	MaxPods:          4096,
	MaxContainers:    32768,
	MaxDevices:       32768,
	MaxDeviceIDs:     65536,
	MaxDecodedBytes:  32 << 20,
	MaxControlFrames: 100,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	for _, f := range []struct{ v, def *int }{
		{&l.MaxMessageBytes, &d.MaxMessageBytes}, {&l.MaxPods, &d.MaxPods}, {&l.MaxContainers, &d.MaxContainers},
		{&l.MaxDevices, &d.MaxDevices}, {&l.MaxDeviceIDs, &d.MaxDeviceIDs}, {&l.MaxDecodedBytes, &d.MaxDecodedBytes},
		{&l.MaxControlFrames, &d.MaxControlFrames},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return l
}

// LimitError is an answer that holds more than a limit allows.
type LimitError struct {
	// What is counted: "pods", "containers", "device entries", "device
	// IDs" or "bytes once decoded".
	What  string
	Limit int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the kubelet's answer holds more than %d %s, far more than a node runs; refused", e.Limit, e.What)
}

// Sizes of the decoded entries, for MaxDecodedBytes.
const (
	podSize       = int(unsafe.Sizeof(Pod{}))
	containerSize = int(unsafe.Sizeof(Container{}))
	devicesSize   = int(unsafe.Sizeof(Devices{}))
	dynamicSize   = int(unsafe.Sizeof(DynamicResource{}))
	claimSize     = int(unsafe.Sizeof(ClaimResource{}))
	idSize        = int(unsafe.Sizeof(""))
)

// budget counts what a decoding has taken of the limits, so that it stops
// at the first entry past one, before that entry is made.
type budget struct {
	lim                               Limits
	pods, containers, devices, ids, b int
}

// take counts one more entry of n, of size bytes, against limit.
func (bud *budget) take(n *int, limit int, what string, size int) error {
	*n++
	if *n > limit {
		return &LimitError{What: what, Limit: limit}
	}
	return bud.bytes(size)
}

// bytes counts size more bytes of decoded memory.
func (bud *budget) bytes(size int) error {
	bud.b += size
	if bud.b > bud.lim.MaxDecodedBytes {
		return &LimitError{What: "bytes once decoded", Limit: bud.lim.MaxDecodedBytes}
	}
	return nil
}
