// Package toolkitlog sends log/slog records into logrus, so that libraries that
// log through slog (exporter-toolkit's web server) write with the same
// format, level and output as the rest of gpuscope.
package toolkitlog

import (
	"context"
	"log/slog"

	"github.com/sirupsen/logrus"
)

// Handler is a slog.Handler that writes each record as a logrus entry. The
// logrus logger decides what is written: its level filters records and its
// formatter writes them.
type Handler struct {
	entry *logrus.Entry
	// fields are the attributes added by WithAttrs, keys already prefixed
	// by the groups open when they were added.
	fields logrus.Fields
	// prefix is the open groups, each followed by a dot.
	prefix string
}

var _ slog.Handler = (*Handler)(nil)

// New returns a handler writing to entry; entry's fields are kept.
func New(entry *logrus.Entry) *Handler { return &Handler{entry: entry} }

// Logger returns a slog.Logger that writes to entry.
func Logger(entry *logrus.Entry) *slog.Logger { return slog.New(New(entry)) }

// level maps slog's levels onto logrus's: below Debug is Trace, above Error
// is still Error (a library's log line never ends the process).
func level(l slog.Level) logrus.Level {
	switch {
	case l < slog.LevelDebug:
		return logrus.TraceLevel
	case l < slog.LevelInfo:
		return logrus.DebugLevel
	case l < slog.LevelWarn:
		return logrus.InfoLevel
	case l < slog.LevelError:
		return logrus.WarnLevel
	}
	return logrus.ErrorLevel
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	return h.entry.Logger.IsLevelEnabled(level(l))
}

// Handle implements slog.Handler.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	fields := make(logrus.Fields, len(h.fields)+r.NumAttrs())
	for k, v := range h.fields {
		fields[k] = v
	}
	r.Attrs(func(a slog.Attr) bool {
		addAttr(fields, h.prefix, a)
		return true
	})
	e := h.entry.WithFields(fields)
	if !r.Time.IsZero() {
		e = e.WithTime(r.Time)
	}
	e.Log(level(r.Level), r.Message)
	return nil
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	fields := make(logrus.Fields, len(h.fields)+len(attrs))
	for k, v := range h.fields {
		fields[k] = v
	}
	for _, a := range attrs {
		addAttr(fields, h.prefix, a)
	}
	return &Handler{entry: h.entry, fields: fields, prefix: h.prefix}
}

// WithGroup implements slog.Handler: later keys are written as
// "group.key", since logrus fields are flat.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &Handler{entry: h.entry, fields: h.fields, prefix: h.prefix + name + "."}
}

// addAttr adds a to fields under prefix, flattening groups and dropping
// empty attributes as slog handlers do.
func addAttr(fields logrus.Fields, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		attrs := v.Group()
		if len(attrs) == 0 {
			return
		}
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range attrs {
			addAttr(fields, p, g)
		}
		return
	}
	if a.Key == "" {
		return
	}
	key := prefix + a.Key
	switch v.Kind() {
	case slog.KindAny:
		// logrus's formatters write an error value as its text.
		fields[key] = v.Any()
	case slog.KindString:
		fields[key] = v.String()
	case slog.KindInt64:
		fields[key] = v.Int64()
	case slog.KindUint64:
		fields[key] = v.Uint64()
	case slog.KindFloat64:
		fields[key] = v.Float64()
	case slog.KindBool:
		fields[key] = v.Bool()
	case slog.KindDuration:
		fields[key] = v.Duration().String()
	case slog.KindTime:
		fields[key] = v.Time()
	default:
		fields[key] = v.String()
	}
}
