// Package sighup catches SIGHUP from the first moments of the process, so
// that a reload asked for during startup neither kills gpuscope (Go's
// default for SIGHUP is to exit with 129, without a word) nor is lost.
package sighup

import (
	"os"
	"os/signal"
	"syscall"
)

// ch holds at most one SIGHUP: several asked before the reloader runs are
// one reload.
var ch = make(chan os.Signal, 1)

// The handler is installed when the package is initialised, before main
// runs and before the packages whose path sorts after this one.
func init() { signal.Notify(ch, syscall.SIGHUP) }

// Channel returns the SIGHUPs received since the process started.
func Channel() <-chan os.Signal { return ch }

// Release gives SIGHUP its default action back, for the commands a
// terminal runs, where a hangup must end them.
func Release() { signal.Stop(ch) }
