package main

import (
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/serve/fieldspage"
	"github.com/gpuscope/gpuscope/source"
)

// fieldsPage builds /fields over the running engine. exposition is called
// per request, once the server exists.
func fieldsPage(eng *engine.Engine, src source.Source, window time.Duration, log *logrus.Entry, exposition func() []byte) (*fieldspage.Handler, error) {
	return fieldspage.New(fieldspage.Options{
		Supports: sourceSupport(),
		Source: func() string {
			if active := eng.Status().Active; active != "" {
				return active
			}
			return src.Name()
		},
		Running:    eng.Counters,
		Exposition: exposition,
		Entities:   eng.Entities,
		Samples:    eng,
		Window:     window,
		Log:        log.WithField("component", "fields"),
	})
}
