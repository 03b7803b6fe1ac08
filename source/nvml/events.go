package nvml

import (
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"
)

// xidEvent is one XID error as the event set reported it.
type xidEvent struct {
	dev *device
	xid uint64
	ts  int64
}

// xidWatcher waits on an NVML event set in its own goroutine and queues
// XID events until the next collection of the group that has the XID errors field.
type xidWatcher struct {
	lib  gonvml.Interface
	log  *logrus.Entry
	wait time.Duration
	set  gonvml.EventSet

	devMu   sync.Mutex
	devices []*device

	mu      sync.Mutex
	queue   []xidEvent
	max     int
	dropped uint64
	last    map[*device]uint64

	stop chan struct{}
	done chan struct{}
}

// newXIDWatcher creates the event set and registers every GPU. A GPU that
// cannot report XIDs is logged and left out; without an event set at all,
// the XID errors field stays at 0.
func newXIDWatcher(lib gonvml.Interface, log *logrus.Entry, devices []*device, wait time.Duration, maxQueue int) *xidWatcher {
	w := &xidWatcher{lib: lib, log: log, wait: wait, max: maxQueue, last: map[*device]uint64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	set, ret := lib.EventSetCreate()
	if err := nvmlErr("EventSetCreate", ret); err != nil {
		log.WithError(err).Warn("cannot watch XID events; DCGM_FI_DEV_XID_ERRORS will stay 0")
		close(w.done)
		return w
	}
	w.set = set
	for _, d := range devices {
		w.register(d, d.handle())
	}
	go w.run()
	return w
}

// register adds a GPU's (possibly new) handle to the event set.
func (w *xidWatcher) register(d *device, h gonvml.Device) {
	if w.set == nil {
		return
	}
	if err := nvmlErr("RegisterEvents(XidCriticalError)", h.RegisterEvents(gonvml.EventTypeXidCriticalError, w.set)); err != nil {
		w.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid}).WithError(err).Warn("cannot watch XID events on this GPU")
		return
	}
	w.devMu.Lock()
	defer w.devMu.Unlock()
	for _, known := range w.devices {
		if known == d {
			return
		}
	}
	w.devices = append(w.devices, d)
}

func (w *xidWatcher) run() {
	defer close(w.done)
	ms := uint32(w.wait / time.Millisecond)
	var lastErr gonvml.Return
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		data, ret := w.set.Wait(ms)
		switch ret {
		case gonvml.SUCCESS:
			lastErr = gonvml.SUCCESS
			if data.EventType&gonvml.EventTypeXidCriticalError != 0 {
				w.push(data, time.Now().UnixNano())
			}
		case gonvml.ERROR_TIMEOUT:
		default:
			// A lost GPU makes Wait fail at once; pause so the loop does not
			// spin, and log each distinct error once.
			if ret != lastErr {
				w.log.WithError(nvmlErr("EventSetWait", ret)).Warn("XID event wait failed")
				lastErr = ret
			}
			select {
			case <-w.stop:
				return
			case <-time.After(w.wait):
			}
		}
	}
}

func (w *xidWatcher) find(h gonvml.Device) *device {
	w.devMu.Lock()
	defer w.devMu.Unlock()
	for _, d := range w.devices {
		if d.handle() == h {
			return d
		}
	}
	if h == nil {
		return nil
	}
	uuid, ret := h.GetUUID()
	if ret != gonvml.SUCCESS {
		return nil
	}
	for _, d := range w.devices {
		if d.uuid == uuid {
			return d
		}
	}
	return nil
}

func (w *xidWatcher) push(data gonvml.EventData, ts int64) {
	d := w.find(data.Device)
	if d == nil {
		w.log.WithField("xid", data.EventData).Warn("XID event from an unknown GPU dropped")
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) >= w.max {
		// Drop the oldest: the newest events say most about the GPU now,
		// and the last XID value stays right.
		copy(w.queue, w.queue[1:])
		w.queue = w.queue[:len(w.queue)-1]
		w.dropped++
		if w.dropped == 1 || w.dropped%1000 == 0 {
			w.log.WithField("dropped", w.dropped).Warn("XID event queue full; oldest events dropped")
		}
	}
	w.queue = append(w.queue, xidEvent{dev: d, xid: data.EventData, ts: ts})
}

// drain hands over the queued events, and records the last XID per GPU.
func (w *xidWatcher) drain() []xidEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]xidEvent, len(w.queue))
	copy(out, w.queue)
	w.queue = w.queue[:0]
	for _, e := range out {
		w.last[e.dev] = e.xid
	}
	return out
}

func (w *xidWatcher) lastXID(d *device) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[d]
}

// close stops the goroutine and frees the event set. The goroutine wakes
// at least every wait period, so this returns within about that time.
func (w *xidWatcher) close(timeout time.Duration) {
	if w.set == nil {
		return
	}
	close(w.stop)
	select {
	case <-w.done:
		_ = w.set.Free()
	case <-time.After(timeout):
		w.log.Warn("XID event goroutine did not stop in time; event set left allocated")
	}
}
