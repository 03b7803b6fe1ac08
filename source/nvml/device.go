package nvml

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/source"
)

// fieldKey names one (entity, field) pair of a device: entity 0 is the GPU,
// 1.. its MIG GPU and compute instances in order (numberEntities).
type fieldKey struct {
	entity int
	field  uint16
}

// instance is one MIG GPU instance of a device.
type instance struct {
	entity *source.Entity
	ent    int
	giID   int
	// h is the handle of the instance's first MIG device, for the GPU
	// instance's memory.
	h   gonvml.Device
	gpm gpmStates
	cis []*computeInstance
}

// computeInstance is one MIG device: a compute instance of a GPU instance.
type computeInstance struct {
	entity *source.Entity
	ent    int
	ciID   int
	h      gonvml.Device
}

// numberEntities gives each GPU and compute instance its entity number
// in fieldKey. Callers hold d.mu or own the device alone.
func (d *device) numberEntities() {
	n := 1
	for _, in := range d.instances {
		in.ent = n
		n++
		for _, ci := range in.cis {
			ci.ent = n
			n++
		}
	}
}

// device is one physical GPU. Everything below busy is touched only by the
// goroutine that holds busy, so a read never races with another read of
// the same GPU.
type device struct {
	index int
	uuid  string

	mu sync.Mutex
	// h is replaced when a lost GPU is re-acquired.
	h         gonvml.Device
	gpu       *source.Entity
	instances []*instance
	lost      bool
	lostErr   error
	nextRetry time.Time
	backoff   time.Duration

	busy atomic.Bool

	// lastMIGList is when the MIG layout was last listed; migStale asks
	// for a listing at the next read, after an instance's handle failed.
	lastMIGList time.Time
	migStale    bool
	// migWarned is set once a problem of the MIG listing was logged.
	migWarned bool

	gpmSupported bool
	// migEnabled is read by the process refresh beside the reads.
	migEnabled atomic.Bool
	links      int
	gen        uint64
	reported   map[fieldKey]bool
	// allFailed counts the reads in a row in which every field failed.
	allFailed int
	// permissionWarned is set once a NO_PERMISSION was logged.
	permissionWarned bool
	// procPermissionWarned is set once the process list's NO_PERMISSION
	// was logged.
	procPermissionWarned bool
	gpm                  gpmStates
	// nvlink is the baseline of DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL's rate.
	nvlink counterBaseline

	// procs is touched only by the process refresh, one at a time
	// (Source.procRefreshMu).
	procs procCursor
}

func (d *device) handle() gonvml.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.h
}

func (d *device) isLost() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lost
}

// entities returns the GPU, its MIG GPU instances and their compute
// instances.
func (d *device) entities() []*source.Entity {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*source.Entity, 0, 1+2*len(d.instances))
	out = append(out, d.gpu)
	for _, in := range d.instances {
		out = append(out, in.entity)
		for _, ci := range in.cis {
			out = append(out, ci.entity)
		}
	}
	return out
}

// cString converts NVML's fixed-size C strings.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// openDevice reads a GPU's identity and capabilities.
func (s *Source) openDevice(index int) (*device, error) {
	h, ret := s.lib.DeviceGetHandleByIndex(index)
	if err := nvmlErr("DeviceGetHandleByIndex", ret); err != nil {
		return nil, fmt.Errorf("GPU %d: %w", index, err)
	}
	uuid, ret := h.GetUUID()
	if err := nvmlErr("GetUUID", ret); err != nil {
		return nil, fmt.Errorf("GPU %d: %w", index, err)
	}
	name, ret := h.GetName()
	if err := nvmlErr("GetName", ret); err != nil {
		return nil, fmt.Errorf("GPU %d: %w", index, err)
	}
	pci, ret := h.GetPciInfo()
	if err := nvmlErr("GetPciInfo", ret); err != nil {
		return nil, fmt.Errorf("GPU %d: %w", index, err)
	}
	// The device label is "nvidia" + the GPU index, as dcgm-exporter writes
	// it (internal/pkg/collector/gpu_collector.go, toMetric), even where the
	// device node's minor number differs.
	gpu := source.NewGPU(index, uuid, cString(pci.BusId[:]), name)
	d := &device{index: index, uuid: uuid, h: h, gpu: &gpu, links: -1, reported: map[fieldKey]bool{}}
	d.gpmSupported = queryGPM(h)
	instances, migEnabled, err := s.enumerateMIG(d, h)
	if err != nil {
		// The GPU itself answers: it is served without its MIG instances,
		// which the next listing looks for again.
		s.log.WithFields(logrus.Fields{"gpu": index, "uuid": uuid, "error": err.Error()}).
			Warn("cannot list the GPU's MIG instances; the GPU is sampled without them")
	}
	d.instances, d.lastMIGList = instances, s.cfg.Clock.Now()
	d.migEnabled.Store(migEnabled)
	d.numberEntities()
	return d, nil
}

// queryGPM says whether the GPU has GPM (Hopper and later).
func queryGPM(h gonvml.Device) bool {
	sup, ret := h.GpmQueryDeviceSupport()
	return ret == gonvml.SUCCESS && sup.IsSupportedDevice != 0
}

// markLost takes a GPU out of sampling until it answers again.
func (s *Source) markLost(d *device, err error, now time.Time) {
	d.mu.Lock()
	already := d.lost
	d.lost, d.lostErr = true, err
	d.backoff = s.cfg.RetryBackoff
	d.nextRetry = now.Add(d.backoff)
	d.mu.Unlock()
	if !already {
		s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid, "error": err.Error()}).
			Warn("GPU stopped answering; its fields are skipped and it is retried with backoff")
	}
	d.gpm.free()
	for _, in := range d.instances {
		in.gpm.free()
	}
}

// retryDue says whether a lost GPU's next retry time has come.
func (d *device) retryDue(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !now.Before(d.nextRetry)
}

// recover re-acquires a lost GPU's handle by UUID. On failure the backoff
// doubles, up to the configured maximum.
func (s *Source) recover(d *device, now time.Time) bool {
	h, ret := s.lib.DeviceGetHandleByUUID(d.uuid)
	err := nvmlErr("DeviceGetHandleByUUID", ret)
	if err == nil {
		_, ret = h.GetUUID()
		err = nvmlErr("GetUUID", ret)
	}
	if err != nil {
		d.mu.Lock()
		d.lostErr = err
		d.backoff = min(2*d.backoff, s.cfg.MaxRetryBackoff)
		d.nextRetry = now.Add(d.backoff)
		d.mu.Unlock()
		s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid, "error": err.Error()}).Debug("lost GPU still not answering")
		return false
	}
	instances, migEnabled, err := s.enumerateMIG(d, h)
	if err != nil {
		s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid, "error": err.Error()}).
			Warn("cannot list the GPU's MIG instances; the GPU is sampled without them")
	}
	s.adoptLayout(d, instances)
	d.mu.Lock()
	d.h, d.lost, d.lostErr = h, false, nil
	d.mu.Unlock()
	d.links, d.lastMIGList = -1, now
	d.migEnabled.Store(migEnabled)
	d.gpmSupported = queryGPM(h)
	s.xid.register(d, h)
	s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid}).Info("lost GPU answers again")
	return true
}
