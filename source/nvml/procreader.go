package nvml

import (
	"errors"
	"fmt"
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/source"
)

// maxReaderGPUs bounds the GPUs a ProcessReader keeps a handle of; a node
// has at most a few dozen, so more means GPUs came and went, and the
// handles are looked up afresh.
const maxReaderGPUs = 256

// ReaderConfig configures a ProcessReader.
type ReaderConfig struct {
	// Lib is the NVML library; nil means the real one (gonvml.New()).
	Lib    gonvml.Interface
	Logger *logrus.Entry
	// MaxProcesses caps the processes listed per GPU. Default 256.
	MaxProcesses int
}

// ProcessReader lists the compute processes of a GPU named by its UUID,
// through the same calls as the NVML source, for a source that reads
// every other field elsewhere: the DCGM source, because DCGM has no call
// that lists a GPU's processes (docs/dcgm.md). It initialises NVML on its
// own; NVML counts its users, so a ProcessReader and an NVML source in one
// process do not shut each other's library down. Safe for concurrent use.
type ProcessReader struct {
	lib gonvml.Interface
	log *logrus.Entry
	max int

	mu     sync.Mutex
	closed bool
	gpus   map[string]*readerGPU
}

type readerGPU struct {
	h   gonvml.Device
	cur procCursor
}

// OpenProcessReader initialises NVML. No other NVML function is called
// unless Init succeeds.
func OpenProcessReader(cfg ReaderConfig) (*ProcessReader, error) {
	r := &ProcessReader{lib: cfg.Lib, log: cfg.Logger, max: cfg.MaxProcesses, gpus: map[string]*readerGPU{}}
	if r.lib == nil {
		r.lib = gonvml.New()
	}
	if r.log == nil {
		r.log = logrus.NewEntry(logrus.StandardLogger())
	}
	if r.max <= 0 {
		r.max = 256
	}
	switch ret := r.lib.Init(); ret {
	case gonvml.SUCCESS:
		return r, nil
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, fmt.Errorf("nvml process list: %w", ErrNoDriver)
	default:
		return nil, fmt.Errorf("nvml process list: Init: %w", ret)
	}
}

// GPUProcesses lists the compute processes of the GPU with this UUID. A
// GPU that NVML cannot find, or that cannot list its processes, is an
// error; a GPU that was lost is looked up again on the next call.
func (r *ProcessReader) GPUProcesses(uuid string) ([]source.Process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("nvml process list: closed")
	}
	g, err := r.gpu(uuid)
	if err != nil {
		return nil, err
	}
	mode, _, ret := g.h.GetMigMode()
	mig := ret == gonvml.SUCCESS && mode == gonvml.DEVICE_MIG_ENABLE
	procs, err := listProcesses(r.lib, g.h, uuid, mig, &g.cur, r.max)
	if isNoPermission(err) && mig {
		// A non-root caller lists each MIG device's processes instead.
		procs, err = listMIGDeviceProcesses(r.lib, g.h, uuid, &g.cur, r.max)
	}
	if err != nil {
		if isLost(err) {
			delete(r.gpus, uuid)
		}
		return nil, fmt.Errorf("nvml process list of %s: %w", uuid, err)
	}
	return procs, nil
}

// gpu returns the handle of a GPU, looking it up by UUID the first time.
// Called with mu held.
func (r *ProcessReader) gpu(uuid string) (*readerGPU, error) {
	if g, ok := r.gpus[uuid]; ok {
		return g, nil
	}
	h, ret := r.lib.DeviceGetHandleByUUID(uuid)
	if err := nvmlErr("DeviceGetHandleByUUID", ret); err != nil {
		return nil, fmt.Errorf("nvml process list of %s: %w", uuid, err)
	}
	if len(r.gpus) >= maxReaderGPUs {
		clear(r.gpus)
	}
	g := &readerGPU{h: h}
	r.gpus[uuid] = g
	return g, nil
}

// Close shuts this user of NVML down; the reader is not used again.
func (r *ProcessReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	clear(r.gpus)
	if err := nvmlErr("Shutdown", r.lib.Shutdown()); err != nil {
		return fmt.Errorf("nvml process list: %w", err)
	}
	return nil
}
