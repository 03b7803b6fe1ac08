// Package smifake is an NVML built from a real nvidia-smi capture
// (internal/testkit/smicapture): go-nvml's mock answering every call the
// NVML source makes with what the capture shows, in NVML's own units, and
// NOT_SUPPORTED wherever the capture prints N/A, [Not Supported] or
// nothing at all. So gpuscope's NVML source runs on what a real driver
// reported, not on values written by the same hands as the source.
package smifake

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuscope/gpuscope/internal/testkit/smicapture"
)

const (
	notSupported = gonvml.ERROR_NOT_SUPPORTED
	mib          = 1 << 20
)

// Fake is the NVML of one snapshot of a capture.
type Fake struct {
	*mock.Interface
	Devices []*mock.Device
	// MIGUUIDs are the UUIDs given to the MIG devices, by GPU: nvidia-smi
	// -q does not print them.
	MIGUUIDs [][]string
}

// New builds the NVML of one snapshot; links is the NVLink count per GPU
// index that `nvidia-smi nvlink -s` shows (smicapture.Capture.NVLinks).
func New(c *smicapture.Capture, s *smicapture.Snapshot) (*Fake, error) {
	f := &Fake{Interface: &mock.Interface{}}
	names := map[int]string{}
	for i, g := range s.GPUs {
		d, migUUIDs, err := newDevice(c, i, g)
		if err != nil {
			return nil, fmt.Errorf("GPU %s: %w", g.BusID, err)
		}
		f.Devices = append(f.Devices, d)
		f.MIGUUIDs = append(f.MIGUUIDs, migUUIDs)
		for _, p := range g.Processes {
			names[p.PID] = p.Name
		}
	}
	cuda, cudaErr := cudaVersion(s.CUDAVersion)
	nvmlVersion := c.Header["nvml_version"]
	if nvmlVersion == "" {
		nvmlVersion = s.DriverVersion
	}
	m := f.Interface
	m.InitFunc = func() gonvml.Return { return gonvml.SUCCESS }
	m.ShutdownFunc = func() gonvml.Return { return gonvml.SUCCESS }
	m.SystemGetDriverVersionFunc = func() (string, gonvml.Return) { return s.DriverVersion, gonvml.SUCCESS }
	m.SystemGetNVMLVersionFunc = func() (string, gonvml.Return) { return nvmlVersion, gonvml.SUCCESS }
	m.SystemGetCudaDriverVersionFunc = func() (int, gonvml.Return) { return cuda, cudaErr }
	m.DeviceGetCountFunc = func() (int, gonvml.Return) { return len(f.Devices), gonvml.SUCCESS }
	m.DeviceGetHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) {
		if i < 0 || i >= len(f.Devices) {
			return nil, gonvml.ERROR_INVALID_ARGUMENT
		}
		return f.Devices[i], gonvml.SUCCESS
	}
	m.DeviceGetHandleByUUIDFunc = func(uuid string) (gonvml.Device, gonvml.Return) {
		for i, g := range s.GPUs {
			if g.Field("uuid").Text() == uuid {
				return f.Devices[i], gonvml.SUCCESS
			}
		}
		return nil, gonvml.ERROR_NOT_FOUND
	}
	m.SystemGetProcessNameFunc = func(pid int) (string, gonvml.Return) {
		if n, ok := names[pid]; ok {
			return n, gonvml.SUCCESS
		}
		return "", gonvml.ERROR_NOT_FOUND
	}
	m.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) {
		set := &mock.EventSet{}
		set.WaitFunc = func(ms uint32) (gonvml.EventData, gonvml.Return) {
			// A capture holds no XID: every wait times out.
			time.Sleep(time.Duration(ms) * time.Millisecond)
			return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
		}
		set.FreeFunc = func() gonvml.Return { return gonvml.SUCCESS }
		return set, gonvml.SUCCESS
	}
	m.GpmSampleAllocFunc = func() (gonvml.GpmSample, gonvml.Return) { return nil, notSupported }
	m.GpmMetricsGetFunc = func(*gonvml.GpmMetricsGetType) gonvml.Return { return notSupported }
	return f, nil
}

// cudaVersion turns nvidia-smi's "13.1" into NVML's 13010.
func cudaVersion(s string) (int, gonvml.Return) {
	major, minor, ok := strings.Cut(s, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil {
		return 0, notSupported
	}
	return ma*1000 + mi*10, gonvml.SUCCESS
}

// u32 answers a numeric call from a capture value, scaled to NVML's unit.
func u32(v smicapture.Value, scale float64) (uint32, gonvml.Return) {
	f, ok := v.Number()
	if !ok {
		return 0, notSupported
	}
	return uint32(f*scale + 0.5), gonvml.SUCCESS
}

func u64(v smicapture.Value, scale float64) (uint64, gonvml.Return) {
	f, ok := v.Number()
	if !ok {
		return 0, notSupported
	}
	return uint64(f*scale + 0.5), gonvml.SUCCESS
}

func integer(v smicapture.Value) (int, gonvml.Return) {
	f, ok := v.Number()
	if !ok {
		return 0, notSupported
	}
	return int(f), gonvml.SUCCESS
}

// yesNo reads "Yes"/"No" and "Enabled"/"Disabled".
func yesNo(v smicapture.Value) (bool, gonvml.Return) {
	switch v.Text() {
	case "Yes", "Enabled":
		return true, gonvml.SUCCESS
	case "No", "Disabled":
		return false, gonvml.SUCCESS
	}
	return false, notSupported
}

func setU64(v *gonvml.FieldValue, x uint64) {
	v.NvmlReturn, v.ValueType = uint32(gonvml.SUCCESS), uint32(gonvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
	binary.LittleEndian.PutUint64(v.Value[:], x)
}

func cBytes(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}
