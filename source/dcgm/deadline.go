package dcgm

import (
	"fmt"
	"sync"
	"time"
)

// DefaultCallTimeout bounds one call to the host engine. A healthy one
// answers in milliseconds; discovery on a large node in well under a second.
const DefaultCallTimeout = 10 * time.Second

// Connect deadlines when Config.ConnectTimeout is 0. Connecting to a running
// nv-hostengine takes milliseconds, so a remote one that has not answered in
// DefaultRemoteConnectTimeout is not coming. An embedded or started host
// engine first initialises every GPU: without persistence mode the driver
// brings each one up on open, which on an 8-GPU node can take far longer.
const (
	DefaultRemoteConnectTimeout = 10 * time.Second
	DefaultStartConnectTimeout  = 2 * time.Minute
)

// DefaultConnectTimeout is the connect deadline of mode when none is set.
func DefaultConnectTimeout(mode Mode) time.Duration {
	if mode == ModeRemote {
		return DefaultRemoteConnectTimeout
	}
	return DefaultStartConnectTimeout
}

// deadlineClient gives every call to the host engine a deadline. A host
// engine that hangs (rather than refusing) would otherwise hold the source,
// and auto mode's probe, for good. A call past its deadline fails with
// ErrConnectionLost, so the source counts as down and reconnects; the call
// itself cannot be cancelled (cgo), so it is left to return on its own, and
// until it has, every other call fails at once: at most one goroutine is
// ever stuck in the host engine.
type deadlineClient struct {
	c       Client
	timeout time.Duration
	// connectTimeout is Connect's own deadline: a host engine that starts
	// in-process initialises the GPUs first.
	connectTimeout time.Duration

	mu      sync.Mutex
	pending chan struct{} // closed when the call past its deadline returns
	what    string
	after   time.Duration // the deadline the pending call missed
}

func withDeadline(c Client, timeout, connectTimeout time.Duration) Client {
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	if connectTimeout <= 0 {
		connectTimeout = timeout
	}
	return &deadlineClient{c: c, timeout: timeout, connectTimeout: connectTimeout}
}

func call[T any](d *deadlineClient, what string, f func() (T, error)) (T, error) {
	return callWithin(d, d.timeout, what, f)
}

func callWithin[T any](d *deadlineClient, timeout time.Duration, what string, f func() (T, error)) (T, error) {
	var zero T
	d.mu.Lock()
	if d.pending != nil {
		select {
		case <-d.pending:
			d.pending = nil
		default:
			stuck, after := d.what, d.after
			d.mu.Unlock()
			return zero, fmt.Errorf("%w: the host engine has not answered %s after %s", ErrConnectionLost, stuck, after)
		}
	}
	d.mu.Unlock()
	type result struct {
		v   T
		err error
	}
	res := make(chan result, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		v, err := f()
		res <- result{v, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-res:
		return r.v, r.err
	case <-t.C:
		d.mu.Lock()
		d.pending, d.what, d.after = done, what, timeout
		d.mu.Unlock()
		return zero, fmt.Errorf("%w: the host engine did not answer %s within %s", ErrConnectionLost, what, timeout)
	}
}

func call0(d *deadlineClient, what string, f func() error) error {
	_, err := call(d, what, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

func (d *deadlineClient) Connect(p ConnectParams) error {
	_, err := callWithin(d, d.connectTimeout, "Connect", func() (struct{}, error) { return struct{}{}, d.c.Connect(p) })
	return err
}
func (d *deadlineClient) Disconnect() error { return call0(d, "Disconnect", d.c.Disconnect) }
func (d *deadlineClient) GPUs() ([]GPUInfo, error) {
	return call(d, "GPUs", d.c.GPUs)
}
func (d *deadlineClient) MIGHierarchy() ([]MIGInfo, error) {
	return call(d, "MIGHierarchy", d.c.MIGHierarchy)
}
func (d *deadlineClient) SwitchLinks() ([]LinkInfo, error) {
	return call(d, "SwitchLinks", d.c.SwitchLinks)
}

func (d *deadlineClient) GPULinks() ([]GPULinkInfo, error) {
	return call(d, "GPULinks", d.c.GPULinks)
}
func (d *deadlineClient) Switches() ([]uint, error) { return call(d, "Switches", d.c.Switches) }
func (d *deadlineClient) CPUs() ([]CPUInfo, error)  { return call(d, "CPUs", d.c.CPUs) }
func (d *deadlineClient) CreateGroup(name string, entities []EntityRef) (Handle, error) {
	return call(d, "CreateGroup", func() (Handle, error) { return d.c.CreateGroup(name, entities) })
}
func (d *deadlineClient) DestroyGroup(h Handle) error {
	return call0(d, "DestroyGroup", func() error { return d.c.DestroyGroup(h) })
}
func (d *deadlineClient) CreateFieldGroup(name string, fields []uint16) (Handle, error) {
	return call(d, "CreateFieldGroup", func() (Handle, error) { return d.c.CreateFieldGroup(name, fields) })
}
func (d *deadlineClient) DestroyFieldGroup(h Handle) error {
	return call0(d, "DestroyFieldGroup", func() error { return d.c.DestroyFieldGroup(h) })
}
func (d *deadlineClient) WatchFields(group, fieldGroup Handle, updateFreq, maxKeepAge time.Duration, maxKeepSamples int) error {
	return call0(d, "WatchFields", func() error {
		return d.c.WatchFields(group, fieldGroup, updateFreq, maxKeepAge, maxKeepSamples)
	})
}
func (d *deadlineClient) ValuesSince(group, fieldGroup Handle, since int64) ([]Value, int64, error) {
	type vs struct {
		v    []Value
		next int64
	}
	r, err := call(d, "ValuesSince", func() (vs, error) {
		v, next, err := d.c.ValuesSince(group, fieldGroup, since)
		return vs{v, next}, err
	})
	return r.v, r.next, err
}
func (d *deadlineClient) LatestValues(entities []EntityRef, fields []uint16) ([]Value, error) {
	return call(d, "LatestValues", func() ([]Value, error) { return d.c.LatestValues(entities, fields) })
}
func (d *deadlineClient) HealthSet(group Handle) error {
	return call0(d, "HealthSet", func() error { return d.c.HealthSet(group) })
}
func (d *deadlineClient) HealthCheck(group Handle) ([]HealthIncident, error) {
	return call(d, "HealthCheck", func() ([]HealthIncident, error) { return d.c.HealthCheck(group) })
}
func (d *deadlineClient) HostEngineVersion() (string, error) {
	return call(d, "HostEngineVersion", d.c.HostEngineVersion)
}
func (d *deadlineClient) NvLinkP2PStatus() ([][]int, error) {
	return call(d, "NvLinkP2PStatus", d.c.NvLinkP2PStatus)
}
func (d *deadlineClient) SupportedProfilingFields(gpu uint) ([]uint16, error) {
	return call(d, "SupportedProfilingFields", func() ([]uint16, error) { return d.c.SupportedProfilingFields(gpu) })
}
func (d *deadlineClient) PauseProfiling() error {
	return call0(d, "PauseProfiling", d.c.PauseProfiling)
}
func (d *deadlineClient) ResumeProfiling() error {
	return call0(d, "ResumeProfiling", d.c.ResumeProfiling)
}
