package dcgm

import (
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/source"
)

// Process listing. DCGM has no call that lists the processes running on a
// GPU now:
//
//   - DCGM_FI_DEV_COMPUTE_PIDS and DCGM_FI_DEV_GRAPHICS_PIDS (fields 210
//     and 211) are internal to the host engine: dcgm_fields.h says "Fields
//     210, 211, 220 and 221 are internal-only", go-dcgm has no constant for
//     them, and its GetValuesSince does not decode binary (blob) values;
//   - dcgmGetPidInfo (go-dcgm's WatchPidFields and GetProcessInfo) needs
//     the PID to ask about, accounting watches set up beforehand, and
//     answers with a process's maximum memory and its SM utilisation
//     averaged over its life, not what it holds and uses now;
//   - DCGM_FI_DEV_ACCOUNTING_DATA is a blob of the same accounting records,
//     which needs accounting mode on the GPU (nvidia-smi -am 1, as root).
//
// So the DCGM source lists processes through NVML beside the host engine,
// as dcgm-exporter does for --kubernetes-virtual-gpus
// (internal/pkg/nvmlprovider/provider.go: GetComputeRunningProcesses and
// GetProcessUtilization): a ProcessReader (the nvml package's, over
// nvmlDeviceGetComputeRunningProcesses and
// nvmlDeviceGetProcessUtilization) is asked for each GPU the host engine
// lists, by UUID, so a process is attributed to the same GPU and MIG
// instance as DCGM's samples. NVML must be loadable in gpuscope's own
// process: with a remote host engine on another host, NVML sees other
// GPUs, none of whose UUIDs match, and no process is listed.

// DefaultProcessInterval is how often the process list is read again.
const DefaultProcessInterval = 5 * time.Second

// DefaultProcessCloseWait bounds how long Close waits for a process read
// still running: an NVML call on a failing GPU can hang.
const DefaultProcessCloseWait = 2 * time.Second

// ProcessReader lists the compute processes running on one GPU, named by
// its UUID (the nvml package's ProcessReader). Each process carries the
// GPU's UUID, its GPU instance (-1 outside MIG) and its SM utilisation in
// percent, or -1 where the driver gives none.
type ProcessReader interface {
	GPUProcesses(uuid string) ([]source.Process, error)
	Close() error
}

// ProcessConfig says how the DCGM source lists GPU processes.
type ProcessConfig struct {
	// Open opens the reader the first time processes are listed; nil
	// means the source lists none (Processes returns nil).
	Open func() (ProcessReader, error)
	// Interval is how often the list is read again, during collections.
	// DefaultProcessInterval when 0.
	Interval time.Duration
	// CloseWait is how long Close waits for a read still running (wall
	// time). DefaultProcessCloseWait when 0.
	CloseWait time.Duration
}

func (c ProcessConfig) withDefaults() ProcessConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultProcessInterval
	}
	if c.CloseWait <= 0 {
		c.CloseWait = DefaultProcessCloseWait
	}
	return c
}

// procState is the process list of the source's GPUs, read in the
// background so that a hung NVML call never holds a collection.
type procState struct {
	mu      sync.Mutex
	reader  ProcessReader
	warned  bool
	running bool
	closed  bool
	next    time.Time
	// byGPU is the last list of each GPU, by UUID: replaced whole, never
	// changed in place. A GPU whose read fails keeps its last list; GPUs
	// the host engine no longer lists are dropped.
	byGPU map[string][]source.Process
	// blind is set while NVML answers for none of DCGM's GPUs (a host
	// engine on another host, a container that sees other GPUs): the
	// source cannot list processes then, rather than list none.
	blind       bool
	blindWarned bool
	wg          sync.WaitGroup
}

var _ source.ProcessLister = (*Source)(nil)

// Processes implements source.ProcessLister: the processes of the GPUs the
// host engine lists, from the last read. It is nil (cannot list) without a
// process reader, while NVML cannot be opened beside DCGM or answers for
// none of its GPUs, and while the host engine is down; empty until the
// first read.
func (s *Source) Processes() []source.Process {
	if s.cfg.Processes.Open == nil || !s.Status().Up {
		return nil
	}
	p := &s.procs
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reader == nil || p.blind {
		return nil
	}
	out := []source.Process{}
	for _, procs := range p.byGPU {
		out = append(out, procs...)
	}
	return out
}

// refreshProcesses starts a read of the process list when one is due and
// none runs. Collect calls it with clientMu held, so the GPU list is the
// connection's.
func (s *Source) refreshProcesses() {
	if s.cfg.Processes.Open == nil || s.conn == nil {
		return
	}
	now := s.cfg.Clock.Now()
	p := &s.procs
	p.mu.Lock()
	if p.running || p.closed || now.Before(p.next) {
		p.mu.Unlock()
		return
	}
	p.running, p.next = true, now.Add(s.cfg.Processes.Interval)
	p.wg.Add(1)
	p.mu.Unlock()
	uuids := make([]string, 0, len(s.conn.gpus))
	for _, g := range s.conn.gpus {
		uuids = append(uuids, g.UUID)
	}
	go s.readProcesses(uuids)
}

// readProcesses lists the processes of each GPU and publishes the lists.
func (s *Source) readProcesses(uuids []string) {
	p := &s.procs
	defer p.wg.Done()
	r := s.processReader()
	byGPU := make(map[string][]source.Process, len(uuids))
	answered := 0
	var lastErr error
	if r != nil {
		p.mu.Lock()
		last := p.byGPU
		p.mu.Unlock()
		for _, u := range uuids {
			procs, err := r.GPUProcesses(u)
			if err != nil {
				s.log.WithError(err).WithField("UUID", u).Debug("GPU process list not refreshed")
				procs, lastErr = last[u], err
			} else {
				answered++
			}
			byGPU[u] = procs
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = false
	if r == nil || p.closed {
		return
	}
	p.byGPU = byGPU
	p.blind = answered == 0 && len(uuids) > 0
	if p.blind && !p.blindWarned {
		p.blindWarned = true
		s.log.WithError(lastErr).Warn("NVML beside DCGM answers for none of the host engine's GPUs (a host engine on another host, or a container that sees other GPUs): GPU processes cannot be listed")
	}
}

// processReader returns the reader, opening it when it is not open yet.
// A failure is logged once as a warning; the next read tries again.
func (s *Source) processReader() ProcessReader {
	p := &s.procs
	p.mu.Lock()
	r := p.reader
	p.mu.Unlock()
	if r != nil {
		return r
	}
	r, err := s.cfg.Processes.Open()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		log := s.log.WithError(err)
		if !p.warned {
			p.warned = true
			log.Warn("cannot list GPU processes through NVML beside DCGM: per-pod memory and SM share of shared GPUs are missing until it can (docs/dcgm.md)")
		} else {
			log.Debug("GPU process list still unavailable")
		}
		return nil
	}
	if p.closed {
		_ = r.Close()
		return nil
	}
	p.reader = r
	s.log.WithFields(logrus.Fields{"interval": s.cfg.Processes.Interval}).Info("listing GPU processes through NVML beside DCGM")
	return r
}

// closeProcesses stops the process reads and closes the reader. A read
// still running after CloseWait keeps the reader open: closing NVML
// under a running call is not safe.
func (s *Source) closeProcesses() {
	p := &s.procs
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	// Wall time: the wait is on the hardware, not on the source's clock.
	t := time.NewTimer(s.cfg.Processes.CloseWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Warn("a GPU process read is still running at close; NVML is left open")
		return
	}
	p.mu.Lock()
	r := p.reader
	p.reader, p.byGPU = nil, nil
	p.mu.Unlock()
	if r != nil {
		if err := r.Close(); err != nil {
			s.log.WithError(err).Debug("closing the GPU process reader")
		}
	}
}
