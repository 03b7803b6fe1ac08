package dcgm

import (
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"
)

// profSupport is which profiling fields one GPU can sample, as the host
// engine said on this connection.
type profSupport struct {
	fields map[uint16]bool
	// reason is set when support could not be read at all.
	reason string
}

// readProfSupport asks each GPU, not just the first, which profiling fields
// it supports: nodes can mix GPU models.
func (s *Source) readProfSupport(c *connState) error {
	for _, g := range c.gpus {
		if _, ok := c.prof[g.ID]; ok {
			continue
		}
		ids, err := s.client.SupportedProfilingFields(g.ID)
		log := s.log.WithFields(logrus.Fields{"gpu": g.ID, "UUID": g.UUID, "model": g.Model})
		switch {
		case err == nil:
			sup := profSupport{fields: make(map[uint16]bool, len(ids))}
			for _, id := range ids {
				sup.fields[id] = true
			}
			c.prof[g.ID] = sup
		case errors.Is(err, ErrConnectionLost):
			return err
		case errors.Is(err, ErrModuleNotLoaded):
			c.prof[g.ID] = profSupport{reason: "DCGM profiling module not loaded"}
			log.WithError(err).Error("profiling fields are skipped: the host engine has no profiling module. Run nv-hostengine from the datacenter-gpu-manager package with its profiling module (libdcgmmoduleprofiling.so) installed, as root or with CAP_SYS_ADMIN")
		case errors.Is(err, ErrInUse):
			c.prof[g.ID] = profSupport{reason: "profiling counters held by another profiler"}
			log.WithError(err).Error("profiling fields are skipped: another profiler (Nsight Systems/Compute, or a second DCGM) holds the profiling counters. Stop it, or pause that tool's DCGM profiling with `dcgmi profile --pause`, then restart gpuscope or let it reconnect")
		default:
			c.prof[g.ID] = profSupport{reason: "profiling not supported: " + err.Error()}
			log.WithError(err).Warn("profiling fields are skipped on this GPU")
		}
	}
	return nil
}

// PauseProfiling releases the profiling counters so that Nsight or another
// profiler can use them; profiling fields have no values until
// ResumeProfiling.
func (s *Source) PauseProfiling() error { return s.setPaused(true) }

// ResumeProfiling takes the profiling counters back.
func (s *Source) ResumeProfiling() error { return s.setPaused(false) }

func (s *Source) setPaused(pause bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("dcgm: source is closed")
	}
	if !s.up {
		// Nothing holds the counters now; the reconnect applies the state.
		s.paused = pause
		s.publishStatusLocked()
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()

	s.clientMu.Lock()
	defer s.clientMu.Unlock()
	var err error
	if pause {
		err = s.client.PauseProfiling()
	} else {
		err = s.client.ResumeProfiling()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.handleErr(err)
		if errors.Is(err, ErrModuleNotLoaded) {
			return fmt.Errorf("dcgm: the host engine has no profiling module, so there is no profiling lock to release: %w", err)
		}
		return fmt.Errorf("dcgm: %s profiling: %w", map[bool]string{true: "pausing", false: "resuming"}[pause], err)
	}
	s.paused = pause
	s.publishStatusLocked()
	s.log.WithField("paused", pause).Info("DCGM profiling state changed")
	return nil
}
