package dcgm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	godcgm "github.com/NVIDIA/go-dcgm/pkg/dcgm"
)

// GoDCGM is the Client over go-dcgm. go-dcgm keeps one connection per
// process, so there is one GoDCGM per process too. Every go-dcgm call except
// Init happens after a successful Init: before it, the C symbols are not
// loaded and a call kills the process.
type GoDCGM struct {
	connected bool
}

// NewGoDCGM returns the production client.
func NewGoDCGM() *GoDCGM { return &GoDCGM{} }

var _ Client = (*GoDCGM)(nil)

var errNotConnected = fmt.Errorf("not connected to DCGM: %w", ErrConnectionLost)

// Connect implements Client.
func (c *GoDCGM) Connect(p ConnectParams) error {
	if c.connected {
		return nil
	}
	var err error
	switch p.Mode {
	case ModeEmbedded:
		_, err = godcgm.Init(godcgm.Embedded)
	case ModeRemote:
		socket := "0"
		if p.UnixSocket {
			socket = "1"
		}
		_, err = godcgm.Init(godcgm.Standalone, p.Address, socket)
	case ModeStart:
		_, err = godcgm.Init(godcgm.StartHostengine)
	default:
		return fmt.Errorf("unknown DCGM mode %q", p.Mode)
	}
	if err != nil {
		return connectError(p, err)
	}
	c.connected = true
	return nil
}

// connectError names what is missing for each way go-dcgm's Init fails.
func connectError(p ConnectParams, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "libdcgm.so.4 not found"):
		return fmt.Errorf("%w: %v", ErrLibraryMissing, err)
	case strings.Contains(msg, "error finding nv-hostengine"):
		return fmt.Errorf("nv-hostengine is not in PATH (install datacenter-gpu-manager, or use --dcgm.mode=embedded): %w", err)
	case classify0(err, -12, "version mismatch") != nil:
		return fmt.Errorf("%w: %v", ErrVersionMismatch, err)
	case strings.Contains(msg, "error connecting to nv-hostengine"):
		if p.Mode == ModeRemote {
			return fmt.Errorf("%w at %s (is nv-hostengine running and reachable?): %v", ErrNotListening, p.Address, err)
		}
		return fmt.Errorf("%w: %v", ErrNotListening, err)
	}
	return err
}

// Disconnect implements Client.
func (c *GoDCGM) Disconnect() error {
	if !c.connected {
		return nil
	}
	c.connected = false
	if err := godcgm.Shutdown(); err != nil {
		return fmt.Errorf("shutting down DCGM: %w", err)
	}
	return nil
}

var codeRE = regexp.MustCompile(`error code (-?\d+)`)

// classify0 returns the sentinel that a go-dcgm error means, or nil. go-dcgm
// reports some errors as *Error with a code, some as text with the code,
// and some as DCGM's message only, so all three are looked at.
func classify0(err error, code int, text string) error {
	if err == nil {
		return nil
	}
	var de *godcgm.Error
	if errors.As(err, &de) && int(de.Code) == code {
		return err
	}
	if m := codeRE.FindStringSubmatch(err.Error()); m != nil {
		if n, _ := strconv.Atoi(m[1]); n == code {
			return err
		}
	}
	if text != "" && strings.Contains(strings.ToLower(err.Error()), text) {
		return err
	}
	return nil
}

// wrap turns a go-dcgm error into one that wraps our sentinels.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	low := strings.ToLower(err.Error())
	var sentinel error
	switch {
	case classify0(err, -21, "") != nil, strings.Contains(low, "connection") &&
		(strings.Contains(low, "invalid") || strings.Contains(low, "not valid") || strings.Contains(low, "disconnected")):
		sentinel = ErrConnectionLost
	case classify0(err, -33, "module") != nil && strings.Contains(low, "not") && strings.Contains(low, "loaded"),
		classify0(err, -33, "") != nil:
		sentinel = ErrModuleNotLoaded
	case classify0(err, -34, "in use") != nil:
		sentinel = ErrInUse
	case classify0(err, -6, "not supported") != nil, classify0(err, -36, "") != nil:
		sentinel = ErrNotSupported
	case classify0(err, -12, "version mismatch") != nil:
		sentinel = ErrVersionMismatch
	}
	if sentinel != nil {
		return fmt.Errorf("%s: %w: %v", what, sentinel, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// GPUs implements Client.
func (c *GoDCGM) GPUs() ([]GPUInfo, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	ids, err := godcgm.GetSupportedDevices()
	if err != nil {
		return nil, wrap("listing GPUs", err)
	}
	out := make([]GPUInfo, 0, len(ids))
	for _, id := range ids {
		d, err := godcgm.GetDeviceInfo(id)
		if err != nil {
			return nil, wrap("reading GPU "+strconv.Itoa(int(id)), err)
		}
		out = append(out, GPUInfo{ID: id, UUID: d.UUID, PCIBusID: d.PCI.BusID, Model: d.Identifiers.Model})
	}
	return out, nil
}

func toRef(p godcgm.GroupEntityPair) EntityRef {
	var g EntityGroup
	switch p.EntityGroupId {
	case godcgm.FE_GPU:
		g = EntityGPU
	case godcgm.FE_GPU_I:
		g = EntityGPUInstance
	case godcgm.FE_GPU_CI:
		g = EntityComputeInstance
	case godcgm.FE_LINK:
		g = EntityLink
	case godcgm.FE_SWITCH:
		g = EntitySwitch
	}
	return EntityRef{Group: g, ID: p.EntityId}
}

func toFE(g EntityGroup) godcgm.Field_Entity_Group {
	switch g {
	case EntityGPU:
		return godcgm.FE_GPU
	case EntityGPUInstance:
		return godcgm.FE_GPU_I
	case EntityComputeInstance:
		return godcgm.FE_GPU_CI
	case EntityLink:
		return godcgm.FE_LINK
	case EntitySwitch:
		return godcgm.FE_SWITCH
	}
	return godcgm.FE_NONE
}

// MIGHierarchy implements Client. The GPU instance profile name is the
// instance's DCGM_FI_DEV_NAME, as dcgm-exporter labels it.
func (c *GoDCGM) MIGHierarchy() ([]MIGInfo, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	h, err := godcgm.GetGPUInstanceHierarchy()
	if err != nil {
		return nil, wrap("reading the MIG hierarchy", err)
	}
	n := min(h.Count, uint(len(h.EntityList)))
	out := make([]MIGInfo, 0, n)
	gpuOf := map[EntityRef]uint{}
	for i := range n {
		e := h.EntityList[i]
		m := MIGInfo{
			Entity: toRef(e.Entity), Parent: toRef(e.Parent),
			InstanceID: e.Info.NvmlInstanceId, ComputeInstanceID: e.Info.NvmlComputeInstanceId,
		}
		if m.Entity.Group == EntityGPUInstance {
			m.GPU = m.Parent.ID
			gpuOf[m.Entity] = m.GPU
			vals, err := godcgm.EntityGetLatestValues(godcgm.FE_GPU_I, m.Entity.ID, []godcgm.Short{godcgm.DCGM_FI_DEV_NAME})
			if err == nil && len(vals) > 0 {
				if s := vals[0].String(); !strings.HasPrefix(s, "<<<") {
					m.Profile = s
				}
			}
		}
		out = append(out, m)
	}
	for i := range out {
		if out[i].Entity.Group == EntityComputeInstance {
			out[i].GPU = gpuOf[out[i].Parent]
		}
	}
	return out, nil
}

// linkID encodes a switch port as DCGM's dcgm_link_t (little-endian:
// entity group, 16-bit index, parent ID), as go-dcgm's AddLinkEntityToGroup.
func linkID(parent godcgm.Field_Entity_Group, parentID, index uint) uint {
	b := make([]byte, 4)
	b[0] = uint8(parent)
	binary.LittleEndian.PutUint16(b[1:3], uint16(index))
	b[3] = uint8(parentID)
	return uint(binary.LittleEndian.Uint32(b))
}

// SwitchLinks implements Client.
func (c *GoDCGM) SwitchLinks() ([]LinkInfo, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	st, err := godcgm.GetNvLinkLinkStatus()
	if err != nil {
		return nil, wrap("reading NvLink status", err)
	}
	var out []LinkInfo
	for _, l := range st {
		if l.ParentType != godcgm.FE_SWITCH {
			continue
		}
		out = append(out, LinkInfo{ID: linkID(godcgm.FE_SWITCH, l.ParentId, l.Index), Switch: l.ParentId, Index: l.Index, Up: l.State == godcgm.LS_UP})
	}
	return out, nil
}

// Switches implements Client.
func (c *GoDCGM) Switches() ([]uint, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	ids, err := godcgm.GetEntityGroupEntities(godcgm.FE_SWITCH)
	if err != nil {
		return nil, wrap("listing NvSwitches", err)
	}
	return ids, nil
}

// CreateGroup implements Client.
func (c *GoDCGM) CreateGroup(name string, entities []EntityRef) (Handle, error) {
	if !c.connected {
		return 0, errNotConnected
	}
	g, err := godcgm.CreateGroup(name)
	if err != nil {
		return 0, wrap("creating group "+name, err)
	}
	for _, e := range entities {
		if err := godcgm.AddEntityToGroup(g, toFE(e.Group), e.ID); err != nil {
			_ = godcgm.DestroyGroup(g)
			return 0, wrap("creating group "+name, err)
		}
	}
	return Handle(g.GetHandle()), nil
}

func groupHandle(h Handle) godcgm.GroupHandle {
	var g godcgm.GroupHandle
	g.SetHandle(uintptr(h))
	return g
}

func fieldHandle(h Handle) godcgm.FieldHandle {
	var f godcgm.FieldHandle
	f.SetHandle(uintptr(h))
	return f
}

// DestroyGroup implements Client.
func (c *GoDCGM) DestroyGroup(h Handle) error {
	if !c.connected {
		return errNotConnected
	}
	return wrap("destroying group", godcgm.DestroyGroup(groupHandle(h)))
}

// CreateFieldGroup implements Client.
func (c *GoDCGM) CreateFieldGroup(name string, fields []uint16) (Handle, error) {
	if !c.connected {
		return 0, errNotConnected
	}
	if len(fields) == 0 {
		return 0, fmt.Errorf("creating field group %s: no fields", name)
	}
	ids := make([]godcgm.Short, len(fields))
	for i, f := range fields {
		ids[i] = godcgm.Short(f)
	}
	fh, err := godcgm.FieldGroupCreate(name, ids)
	if err != nil {
		return 0, wrap("creating field group "+name, err)
	}
	return Handle(fh.GetHandle()), nil
}

// DestroyFieldGroup implements Client.
func (c *GoDCGM) DestroyFieldGroup(h Handle) error {
	if !c.connected {
		return errNotConnected
	}
	return wrap("destroying field group", godcgm.FieldGroupDestroy(fieldHandle(h)))
}

// WatchFields implements Client.
func (c *GoDCGM) WatchFields(group, fieldGroup Handle, updateFreq, maxKeepAge time.Duration, maxKeepSamples int) error {
	if !c.connected {
		return errNotConnected
	}
	err := godcgm.WatchFieldsWithGroupEx(fieldHandle(fieldGroup), groupHandle(group),
		updateFreq.Microseconds(), maxKeepAge.Seconds(), int32(min(maxKeepSamples, 1<<30)))
	return wrap("watching fields", err)
}

// ValuesSince implements Client.
func (c *GoDCGM) ValuesSince(group, fieldGroup Handle, since int64) ([]Value, int64, error) {
	if !c.connected {
		return nil, 0, errNotConnected
	}
	vals, next, err := godcgm.GetValuesSince(groupHandle(group), fieldHandle(fieldGroup), time.UnixMicro(since))
	if err != nil {
		return nil, 0, wrap("reading values", err)
	}
	out := make([]Value, 0, len(vals))
	for i := range vals {
		fv := &vals[i]
		v := Value{
			Entity:  toRef(godcgm.GroupEntityPair{EntityGroupId: fv.EntityGroupId, EntityId: fv.EntityID}),
			FieldID: uint16(fv.FieldID), TS: fv.TS, Status: fv.Status,
		}
		switch fv.FieldType {
		case godcgm.DCGM_FT_INT64, godcgm.DCGM_FT_TIMESTAMP:
			v.Kind, v.Int = KindInt64, fv.Int64()
		case godcgm.DCGM_FT_DOUBLE:
			v.Kind, v.Float = KindFloat64, fv.Float64()
		case godcgm.DCGM_FT_STRING:
			v.Kind = KindString
			if fv.StringValue != nil {
				v.Str = *fv.StringValue
			}
		default:
			continue
		}
		out = append(out, v)
	}
	return out, next.UnixMicro(), nil
}

// HealthSet implements Client.
func (c *GoDCGM) HealthSet(group Handle) error {
	if !c.connected {
		return errNotConnected
	}
	return wrap("setting health watches", godcgm.HealthSet(groupHandle(group), godcgm.DCGM_HEALTH_WATCH_ALL))
}

// HealthCheck implements Client.
func (c *GoDCGM) HealthCheck(group Handle) ([]HealthIncident, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	r, err := godcgm.HealthCheck(groupHandle(group))
	if err != nil {
		return nil, wrap("checking health", err)
	}
	out := make([]HealthIncident, 0, len(r.Incidents))
	for _, in := range r.Incidents {
		out = append(out, HealthIncident{Entity: toRef(in.EntityInfo), System: uint32(in.System), Result: int(in.Health), Code: int(in.Error.Code), Message: in.Error.Message})
	}
	return out, nil
}

// SupportedProfilingFields implements Client.
func (c *GoDCGM) SupportedProfilingFields(gpu uint) ([]uint16, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	groups, err := godcgm.GetSupportedMetricGroups(gpu)
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

// PauseProfiling implements Client.
func (c *GoDCGM) PauseProfiling() error {
	if !c.connected {
		return errNotConnected
	}
	return wrap("pausing profiling", profCall("dcgmProfPause"))
}

// ResumeProfiling implements Client.
func (c *GoDCGM) ResumeProfiling() error {
	if !c.connected {
		return errNotConnected
	}
	return wrap("resuming profiling", profCall("dcgmProfResume"))
}
