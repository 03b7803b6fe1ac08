// Package godcgm is the production dcgm.Client: a thin adapter over go-dcgm,
// and with the profiling pause the only code in dcgm/ that needs cgo. The
// dcgm package above it is pure Go and tested against dcgmfake.
package godcgm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	nvdcgm "github.com/NVIDIA/go-dcgm/pkg/dcgm"

	"github.com/gpuscope/gpuscope/source/dcgm"
)

// Client is the dcgm.Client over go-dcgm. go-dcgm keeps one connection per
// process, so there is one Client per process too. Every go-dcgm call except
// Init happens after a successful Init: before it, the C symbols are not
// loaded and a call kills the process.
type Client struct {
	// HostEngineLogLevel, when set, makes an embedded host engine write its
	// own log to standard error at this level (NONE, FATAL, ERROR, WARN,
	// INFO, DEBUG or VERB), as dcgm-exporter's --enable-dcgm-log does.
	HostEngineLogLevel string
	// AcceptFakeGPUs keeps a GPU whose identity the host engine cannot read
	// (one of DCGM's fake GPUs) as fake<ID> instead of failing, as
	// dcgm-exporter's --fake-gpus does.
	AcceptFakeGPUs bool

	connected bool
}

// New returns the production client.
func New() *Client { return &Client{} }

var _ dcgm.Client = (*Client)(nil)

var errNotConnected = fmt.Errorf("not connected to DCGM: %w", dcgm.ErrConnectionLost)

// Connect implements dcgm.Client.
func (c *Client) Connect(p dcgm.ConnectParams) error {
	if c.connected {
		return nil
	}
	if err := c.setHostEngineLog(); err != nil {
		return err
	}
	var err error
	switch p.Mode {
	case dcgm.ModeEmbedded:
		_, err = nvdcgm.Init(nvdcgm.Embedded)
	case dcgm.ModeRemote:
		socket := "0"
		if p.UnixSocket {
			socket = "1"
		}
		_, err = nvdcgm.Init(nvdcgm.Standalone, p.Address, socket)
	case dcgm.ModeStart:
		_, err = nvdcgm.Init(nvdcgm.StartHostengine)
	default:
		return fmt.Errorf("unknown DCGM mode %q", p.Mode)
	}
	if err != nil {
		return connectError(p, err)
	}
	c.connected = true
	return nil
}

// setHostEngineLog sets the variables DCGM reads when its host engine
// starts, as dcgm-exporter does before Init (internal/pkg/dcgmprovider/dcgm.go).
func (c *Client) setHostEngineLog() error {
	if c.HostEngineLogLevel == "" {
		return nil
	}
	if err := os.Setenv("__DCGM_DBG_FILE", "-"); err != nil {
		return fmt.Errorf("host engine log: %w", err)
	}
	if err := os.Setenv("__DCGM_DBG_LVL", c.HostEngineLogLevel); err != nil {
		return fmt.Errorf("host engine log: %w", err)
	}
	return nil
}

// connectError names what is missing for each way go-dcgm's Init fails.
func connectError(p dcgm.ConnectParams, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "libdcgm.so.4 not found"):
		return fmt.Errorf("%w: %v", dcgm.ErrLibraryMissing, err)
	case strings.Contains(msg, "error finding nv-hostengine"):
		return fmt.Errorf("nv-hostengine is not in PATH (install datacenter-gpu-manager, or use the embedded mode): %w", err)
	case hasDCGMCode(err, -12, "version mismatch"):
		return fmt.Errorf("%w: %v", dcgm.ErrVersionMismatch, err)
	case strings.Contains(msg, "error connecting to nv-hostengine"):
		if p.Mode == dcgm.ModeRemote {
			return fmt.Errorf("%w at %s (is nv-hostengine running and reachable?): %v", dcgm.ErrNotListening, p.Address, err)
		}
		return fmt.Errorf("%w: %v", dcgm.ErrNotListening, err)
	}
	return err
}

// Disconnect implements dcgm.Client.
func (c *Client) Disconnect() error {
	if !c.connected {
		return nil
	}
	c.connected = false
	if err := nvdcgm.Shutdown(); err != nil {
		return fmt.Errorf("shutting down DCGM: %w", err)
	}
	return nil
}

var codeRE = regexp.MustCompile(`error code (-?\d+)`)

// hasDCGMCode says whether err is DCGM's error code (a dcgmReturn_t such as
// -21), or, when text is set, carries DCGM's message containing text.
// go-dcgm reports some errors as *Error with a code, some as text with the
// code, and some as DCGM's message only, so all three are looked at.
func hasDCGMCode(err error, code int, text string) bool {
	if err == nil {
		return false
	}
	var de *nvdcgm.Error
	if errors.As(err, &de) && int(de.Code) == code {
		return true
	}
	if m := codeRE.FindStringSubmatch(err.Error()); m != nil {
		if n, _ := strconv.Atoi(m[1]); n == code {
			return true
		}
	}
	return text != "" && strings.Contains(strings.ToLower(err.Error()), text)
}

// wrap turns a go-dcgm error into one that wraps our sentinels.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	low := strings.ToLower(err.Error())
	var sentinel error
	switch {
	case hasDCGMCode(err, -21, ""), strings.Contains(low, "connection") &&
		(strings.Contains(low, "invalid") || strings.Contains(low, "not valid") || strings.Contains(low, "disconnected")):
		sentinel = dcgm.ErrConnectionLost
	case hasDCGMCode(err, -33, "module") && strings.Contains(low, "not") && strings.Contains(low, "loaded"),
		hasDCGMCode(err, -33, ""):
		sentinel = dcgm.ErrModuleNotLoaded
	case hasDCGMCode(err, -34, "in use"):
		sentinel = dcgm.ErrInUse
	case hasDCGMCode(err, -6, "not supported"), hasDCGMCode(err, -36, ""):
		sentinel = dcgm.ErrNotSupported
	case hasDCGMCode(err, -12, "version mismatch"):
		sentinel = dcgm.ErrVersionMismatch
	}
	if sentinel != nil {
		return fmt.Errorf("%s: %w: %v", what, sentinel, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// GPUs implements dcgm.Client.
func (c *Client) GPUs() ([]dcgm.GPUInfo, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	ids, err := nvdcgm.GetSupportedDevices()
	if err != nil {
		return nil, wrap("listing GPUs", err)
	}
	return gpuInfos(ids, func(id uint) (dcgm.GPUInfo, error) {
		d, err := nvdcgm.GetDeviceInfo(id)
		if err != nil {
			return dcgm.GPUInfo{}, wrap("reading GPU "+strconv.Itoa(int(id)), err)
		}
		return dcgm.GPUInfo{ID: id, UUID: d.UUID, PCIBusID: d.PCI.BusID, Model: d.Identifiers.Model}, nil
	}, c.AcceptFakeGPUs)
}

// gpuInfos reads each GPU's identity. A GPU whose identity cannot be read
// fails the list, unless acceptFake: then it is kept as fake<ID>, as
// dcgm-exporter's --fake-gpus keeps it (internal/pkg/deviceinfo/
// device_info.go, initializeGPUInfo).
func gpuInfos(ids []uint, read func(uint) (dcgm.GPUInfo, error), acceptFake bool) ([]dcgm.GPUInfo, error) {
	out := make([]dcgm.GPUInfo, 0, len(ids))
	for _, id := range ids {
		info, err := read(id)
		if err != nil {
			if !acceptFake {
				return nil, err
			}
			info = dcgm.GPUInfo{ID: id, UUID: "fake" + strconv.Itoa(int(id))}
		}
		out = append(out, info)
	}
	return out, nil
}

func toRef(p nvdcgm.GroupEntityPair) dcgm.EntityRef {
	var g dcgm.EntityGroup
	switch p.EntityGroupId {
	case nvdcgm.FE_GPU:
		g = dcgm.EntityGPU
	case nvdcgm.FE_GPU_I:
		g = dcgm.EntityGPUInstance
	case nvdcgm.FE_GPU_CI:
		g = dcgm.EntityComputeInstance
	case nvdcgm.FE_LINK:
		g = dcgm.EntityLink
	case nvdcgm.FE_SWITCH:
		g = dcgm.EntitySwitch
	case nvdcgm.FE_CPU:
		g = dcgm.EntityCPU
	case nvdcgm.FE_CPU_CORE:
		g = dcgm.EntityCPUCore
	}
	return dcgm.EntityRef{Group: g, ID: p.EntityId}
}

func toFE(g dcgm.EntityGroup) nvdcgm.Field_Entity_Group {
	switch g {
	case dcgm.EntityGPU:
		return nvdcgm.FE_GPU
	case dcgm.EntityGPUInstance:
		return nvdcgm.FE_GPU_I
	case dcgm.EntityComputeInstance:
		return nvdcgm.FE_GPU_CI
	case dcgm.EntityLink:
		return nvdcgm.FE_LINK
	case dcgm.EntitySwitch:
		return nvdcgm.FE_SWITCH
	case dcgm.EntityCPU:
		return nvdcgm.FE_CPU
	case dcgm.EntityCPUCore:
		return nvdcgm.FE_CPU_CORE
	}
	return nvdcgm.FE_NONE
}

// MIGHierarchy implements dcgm.Client. The GPU instance profile name is the
// instance's DCGM_FI_DEV_NAME, read as live data as dcgm-exporter reads it
// (internal/pkg/deviceinfo/device_info.go, populateMigProfileNames): a cached
// read before any watch of the field is blank.
func (c *Client) MIGHierarchy() ([]dcgm.MIGInfo, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	h, err := nvdcgm.GetGPUInstanceHierarchy()
	if err != nil {
		return nil, wrap("reading the MIG hierarchy", err)
	}
	n := min(h.Count, uint(len(h.EntityList)))
	out := make([]dcgm.MIGInfo, 0, n)
	gpuOf := map[dcgm.EntityRef]uint{}
	var instances []nvdcgm.GroupEntityPair
	for i := range n {
		e := h.EntityList[i]
		m := dcgm.MIGInfo{
			Entity: toRef(e.Entity), Parent: toRef(e.Parent),
			InstanceID: e.Info.NvmlInstanceId, ComputeInstanceID: e.Info.NvmlComputeInstanceId,
		}
		if m.Entity.Group == dcgm.EntityGPUInstance {
			m.GPU = m.Parent.ID
			gpuOf[m.Entity] = m.GPU
			instances = append(instances, nvdcgm.GroupEntityPair{EntityGroupId: nvdcgm.FE_GPU_I, EntityId: m.Entity.ID})
		}
		out = append(out, m)
	}
	profiles := map[uint]string{}
	if len(instances) > 0 {
		vals, err := nvdcgm.EntitiesGetLatestValues(instances, []nvdcgm.Short{nvdcgm.DCGM_FI_DEV_NAME}, nvdcgm.DCGM_FV_FLAG_LIVE_DATA)
		if err == nil {
			for _, v := range vals {
				if s := v.String(); v.Status == 0 && !strings.HasPrefix(s, "<<<") {
					profiles[v.EntityID] = s
				}
			}
		}
	}
	for i := range out {
		switch out[i].Entity.Group {
		case dcgm.EntityGPUInstance:
			out[i].Profile = profiles[out[i].Entity.ID]
		case dcgm.EntityComputeInstance:
			out[i].GPU = gpuOf[out[i].Parent]
		}
	}
	return out, nil
}

// linkID encodes a switch port or a GPU's link as DCGM's dcgm_link_t (little-endian:
// entity group, 16-bit index, parent ID), as go-dcgm's AddLinkEntityToGroup.
func linkID(parent nvdcgm.Field_Entity_Group, parentID, index uint) uint {
	b := make([]byte, 4)
	b[0] = uint8(parent)
	binary.LittleEndian.PutUint16(b[1:3], uint16(index))
	b[3] = uint8(parentID)
	return uint(binary.LittleEndian.Uint32(b))
}

// SwitchLinks implements dcgm.Client.
func (c *Client) SwitchLinks() ([]dcgm.LinkInfo, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	st, err := nvdcgm.GetNvLinkLinkStatus()
	if err != nil {
		return nil, wrap("reading NvLink status", err)
	}
	var out []dcgm.LinkInfo
	for _, l := range st {
		if l.ParentType != nvdcgm.FE_SWITCH {
			continue
		}
		out = append(out, dcgm.LinkInfo{ID: linkID(nvdcgm.FE_SWITCH, l.ParentId, l.Index), Switch: l.ParentId, Index: l.Index, Up: l.State == nvdcgm.LS_UP})
	}
	return out, nil
}

// GPULinks implements dcgm.Client. The IDs are the entities dcgm-exporter
// adds with AddLinkEntityToGroup(group, index, FE_GPU, gpu) and reads with
// LinkGetLatestValues (internal/pkg/devicewatcher/device_watcher.go,
// createNVLinkGroups).
func (c *Client) GPULinks() ([]dcgm.GPULinkInfo, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	st, err := nvdcgm.GetNvLinkLinkStatus()
	if err != nil {
		return nil, wrap("reading NvLink status", err)
	}
	var out []dcgm.GPULinkInfo
	for _, l := range st {
		if l.ParentType != nvdcgm.FE_GPU {
			continue
		}
		out = append(out, dcgm.GPULinkInfo{ID: linkID(nvdcgm.FE_GPU, l.ParentId, l.Index), GPU: l.ParentId, Index: l.Index, Up: l.State == nvdcgm.LS_UP})
	}
	return out, nil
}

// Switches implements dcgm.Client.
func (c *Client) Switches() ([]uint, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	ids, err := nvdcgm.GetEntityGroupEntities(nvdcgm.FE_SWITCH)
	if err != nil {
		return nil, wrap("listing NvSwitches", err)
	}
	return ids, nil
}

// CPUs implements dcgm.Client: the CPU hierarchy, with each CPU's cores
// from its OwnedCores bitmask. A host engine without CPU support (no Grace)
// answers with an error, which means no CPUs.
func (c *Client) CPUs() ([]dcgm.CPUInfo, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	h, err := nvdcgm.GetCPUHierarchy()
	if err != nil {
		return nil, wrap("reading the CPU hierarchy", err)
	}
	n := min(h.NumCPUs, uint(len(h.CPUs)))
	out := make([]dcgm.CPUInfo, 0, n)
	for i := range n {
		cpu := dcgm.CPUInfo{ID: h.CPUs[i].CPUID}
		for w, bits := range h.CPUs[i].OwnedCores {
			for b := range 64 {
				if bits&(1<<b) != 0 {
					cpu.Cores = append(cpu.Cores, uint(w*64+b))
				}
			}
		}
		out = append(out, cpu)
	}
	return out, nil
}

// CreateGroup implements dcgm.Client.
func (c *Client) CreateGroup(name string, entities []dcgm.EntityRef) (dcgm.Handle, error) {
	if !c.connected {
		return 0, errNotConnected
	}
	g, err := nvdcgm.CreateGroup(name)
	if err != nil {
		return 0, wrap("creating group "+name, err)
	}
	for _, e := range entities {
		if err := nvdcgm.AddEntityToGroup(g, toFE(e.Group), e.ID); err != nil {
			_ = nvdcgm.DestroyGroup(g)
			return 0, wrap("creating group "+name, err)
		}
	}
	return dcgm.Handle(g.GetHandle()), nil
}

func groupHandle(h dcgm.Handle) nvdcgm.GroupHandle {
	var g nvdcgm.GroupHandle
	g.SetHandle(uintptr(h))
	return g
}

func fieldHandle(h dcgm.Handle) nvdcgm.FieldHandle {
	var f nvdcgm.FieldHandle
	f.SetHandle(uintptr(h))
	return f
}

// DestroyGroup implements dcgm.Client.
func (c *Client) DestroyGroup(h dcgm.Handle) error {
	if !c.connected {
		return errNotConnected
	}
	return wrap("destroying group", nvdcgm.DestroyGroup(groupHandle(h)))
}

// CreateFieldGroup implements dcgm.Client.
func (c *Client) CreateFieldGroup(name string, fields []uint16) (dcgm.Handle, error) {
	if !c.connected {
		return 0, errNotConnected
	}
	if len(fields) == 0 {
		return 0, fmt.Errorf("creating field group %s: no fields", name)
	}
	ids := make([]nvdcgm.Short, len(fields))
	for i, f := range fields {
		ids[i] = nvdcgm.Short(f)
	}
	fh, err := nvdcgm.FieldGroupCreate(name, ids)
	if err != nil {
		return 0, wrap("creating field group "+name, err)
	}
	return dcgm.Handle(fh.GetHandle()), nil
}

// DestroyFieldGroup implements dcgm.Client.
func (c *Client) DestroyFieldGroup(h dcgm.Handle) error {
	if !c.connected {
		return errNotConnected
	}
	return wrap("destroying field group", nvdcgm.FieldGroupDestroy(fieldHandle(h)))
}

// WatchFields implements dcgm.Client.
func (c *Client) WatchFields(group, fieldGroup dcgm.Handle, updateFreq, maxKeepAge time.Duration, maxKeepSamples int) error {
	if !c.connected {
		return errNotConnected
	}
	err := nvdcgm.WatchFieldsWithGroupEx(fieldHandle(fieldGroup), groupHandle(group),
		updateFreq.Microseconds(), maxKeepAge.Seconds(), int32(min(maxKeepSamples, 1<<30)))
	return wrap("watching fields", err)
}

// ValuesSince implements dcgm.Client.
func (c *Client) ValuesSince(group, fieldGroup dcgm.Handle, since int64) ([]dcgm.Value, int64, error) {
	if !c.connected {
		return nil, 0, errNotConnected
	}
	vals, next, err := nvdcgm.GetValuesSince(groupHandle(group), fieldHandle(fieldGroup), time.UnixMicro(since))
	if err != nil {
		if strings.Contains(err.Error(), "field value limit exceeded") {
			// go-dcgm refuses to return more than its limit and gives no
			// next position; the source moves its position on.
			return nil, 0, fmt.Errorf("reading values: %w: %v", dcgm.ErrTooManyValues, err)
		}
		return nil, 0, wrap("reading values", err)
	}
	return toValues(vals), next.UnixMicro(), nil
}

// HealthSet implements dcgm.Client.
func (c *Client) HealthSet(group dcgm.Handle) error {
	if !c.connected {
		return errNotConnected
	}
	return wrap("setting health watches", nvdcgm.HealthSet(groupHandle(group), nvdcgm.DCGM_HEALTH_WATCH_ALL))
}

// HealthCheck implements dcgm.Client.
func (c *Client) HealthCheck(group dcgm.Handle) ([]dcgm.HealthIncident, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	r, err := nvdcgm.HealthCheck(groupHandle(group))
	if err != nil {
		return nil, wrap("checking health", err)
	}
	out := make([]dcgm.HealthIncident, 0, len(r.Incidents))
	for _, in := range r.Incidents {
		out = append(out, dcgm.HealthIncident{Entity: toRef(in.EntityInfo), System: uint32(in.System), Result: int(in.Health), Code: int(in.Error.Code), Message: in.Error.Message})
	}
	return out, nil
}

// NvLinkP2PStatus implements dcgm.Client.
func (c *Client) NvLinkP2PStatus() ([][]int, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	st, err := nvdcgm.GetNvLinkP2PStatus()
	if err != nil {
		return nil, wrap("reading the NVLink P2P status", err)
	}
	out := make([][]int, len(st.Gpus))
	for i, row := range st.Gpus {
		out[i] = make([]int, len(row))
		for j, l := range row {
			out[i][j] = int(l)
		}
	}
	return out, nil
}

// SupportedProfilingFields implements dcgm.Client.
func (c *Client) SupportedProfilingFields(gpu uint) ([]uint16, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	groups, err := nvdcgm.GetSupportedMetricGroups(gpu)
	if err != nil {
		return nil, wrap("reading the profiling metric groups of GPU "+strconv.Itoa(int(gpu)), err)
	}
	var out []uint16
	for _, g := range groups {
		for _, id := range g.FieldIds {
			out = append(out, uint16(id))
		}
	}
	return out, nil
}

// PauseProfiling implements dcgm.Client.
func (c *Client) PauseProfiling() error {
	if !c.connected {
		return errNotConnected
	}
	return wrap("pausing profiling", profCall("dcgmProfPause"))
}

// ResumeProfiling implements dcgm.Client.
func (c *Client) ResumeProfiling() error {
	if !c.connected {
		return errNotConnected
	}
	return wrap("resuming profiling", profCall("dcgmProfResume"))
}
