package dcgm

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/clock"
)

// DefaultHostenginePort is nv-hostengine's TCP port.
const DefaultHostenginePort = "5555"

// Config configures the DCGM source.
type Config struct {
	// Mode is embedded, remote or start; empty means remote when
	// RemoteHostengine is set, embedded otherwise.
	Mode Mode
	// RemoteHostengine is host:port, host (port 5555), a unix socket path
	// ("/run/nvidia/hostengine.sock") or "unix://" followed by one.
	RemoteHostengine string
	// Window is the longest window the engine computes over the samples;
	// keepAge derives from it how long the host engine keeps them.
	Window time.Duration
	// DefaultInterval is the watch interval of a group that asks for none.
	// Default 1s.
	DefaultInterval time.Duration
	// BackoffInitial and BackoffMax bound the reconnect backoff. Defaults 1s
	// and 30s.
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	Log            logrus.FieldLogger
	// Clock times the reconnect backoff and stamps health results; the
	// wall clock when nil. Tests share a fake one with dcgmfake.
	Clock clock.Clock
	// CallTimeout bounds each call to the host engine (wall time); past
	// it the source counts as down. DefaultCallTimeout when 0.
	CallTimeout time.Duration
	// ConnectTimeout bounds each connect (wall time);
	// DefaultConnectTimeout(Mode) when 0.
	ConnectTimeout time.Duration
	// BindUnbindPoll, when positive, is how often Collect asks the host
	// engine for its GPUs; a GPU bound or unbound since the last look is
	// re-discovered and re-watched, and Collect returns
	// source.ErrEntitiesChanged. Zero keeps the GPUs found at connect.
	BindUnbindPoll time.Duration
	// Processes says how the GPUs' processes are listed (processes.go);
	// none are without Processes.Open.
	Processes ProcessConfig
}

// minKeepAge is the least time the host engine keeps samples.
const minKeepAge = 30 * time.Second

// keepAge is how long the host engine keeps the samples of fields watched
// every iv: twice the longest window, so that a scrape arriving late still
// finds every sample since the previous read, at least two intervals, and
// at least minKeepAge.
func (c *Config) keepAge(iv time.Duration) time.Duration {
	return max(2*c.Window, 2*iv, minKeepAge)
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.Mode == "" {
		out.Mode = ModeEmbedded
		if out.RemoteHostengine != "" {
			out.Mode = ModeRemote
		}
	}
	if out.DefaultInterval <= 0 {
		out.DefaultInterval = time.Second
	}
	if out.BackoffInitial <= 0 {
		out.BackoffInitial = time.Second
	}
	if out.BackoffMax < out.BackoffInitial {
		out.BackoffMax = 30 * time.Second
		if out.BackoffMax < out.BackoffInitial {
			out.BackoffMax = out.BackoffInitial
		}
	}
	if out.ConnectTimeout <= 0 {
		out.ConnectTimeout = DefaultConnectTimeout(out.Mode)
	}
	out.Clock = clock.Or(out.Clock)
	out.Processes = out.Processes.withDefaults()
	if out.Log == nil {
		out.Log = logrus.StandardLogger()
	}
	return out
}

// Validate reports a mode or host-engine address gpuscope cannot use, before
// any connection is tried, so that a typo is an error rather than a host
// engine that seems to be away.
func (c Config) Validate() error {
	d := c.withDefaults()
	_, err := d.connectParams()
	return err
}

// connectParams turns the configuration into what Client.Connect needs.
func (c *Config) connectParams() (ConnectParams, error) {
	switch c.Mode {
	case ModeEmbedded, ModeStart:
		if c.RemoteHostengine != "" {
			return ConnectParams{}, fmt.Errorf("%w, not %s mode (address %q)", ErrAddressNeedsRemote, c.Mode, c.RemoteHostengine)
		}
		return ConnectParams{Mode: c.Mode}, nil
	case ModeRemote:
		addr := strings.TrimSpace(c.RemoteHostengine)
		if addr == "" {
			return ConnectParams{}, ErrRemoteNeedsAddress
		}
		if p, ok := strings.CutPrefix(addr, "unix://"); ok {
			if p == "" {
				return ConnectParams{}, fmt.Errorf("host engine address %q: empty unix socket path", addr)
			}
			return ConnectParams{Mode: ModeRemote, Address: p, UnixSocket: true}, nil
		}
		if strings.HasPrefix(addr, "/") {
			return ConnectParams{Mode: ModeRemote, Address: addr, UnixSocket: true}, nil
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			// A bare host name gets nv-hostengine's default port.
			if strings.Contains(err.Error(), "missing port") {
				return ConnectParams{Mode: ModeRemote, Address: net.JoinHostPort(addr, DefaultHostenginePort)}, nil
			}
			return ConnectParams{}, fmt.Errorf("host engine address %q: %w", addr, err)
		}
		if host == "" {
			host = "localhost"
		}
		return ConnectParams{Mode: ModeRemote, Address: net.JoinHostPort(host, port)}, nil
	}
	return ConnectParams{}, fmt.Errorf("mode %q: %w", c.Mode, ErrUnknownMode)
}

// describe names the mode and target for messages.
func (p ConnectParams) describe() string {
	switch {
	case p.Mode == ModeRemote && p.UnixSocket:
		return "remote mode (host engine socket " + p.Address + ")"
	case p.Mode == ModeRemote:
		return "remote mode (host engine at " + p.Address + ")"
	}
	return string(p.Mode) + " mode"
}
