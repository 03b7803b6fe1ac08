package config

import (
	"fmt"
	"strings"
	"time"
)

// Help categories of the serve flags.
const (
	CatCollection = "Collection"
	CatLabels     = "Labels"
	CatSources    = "Sources and DCGM"
	CatSim        = "Simulated GPUs (--source=sim)"
	CatKubernetes = "Kubernetes and HPC jobs"
	CatWeb        = "Web and TLS"
	CatAPI        = "Live view and API"
	CatLogging    = "Logging and debugging"
)

// Option is one serve flag, whole: its names, its variables, its default
// and the field it fills (Value), its help and category, and its check.
// The command's flags (cmd/gpuscope), Defaults and Validate are all
// derived from Options, so a flag is defined in one place.
type Option struct {
	// Name is gpuscope's name; EnvVar(Name) is its variable.
	Name string
	// Aliases are further names: one-letter ones, and dcgm-exporter's.
	Aliases []string
	// Compat are the variables the flag answers to after EnvVar(Name):
	// dcgm-exporter's, in the order dcgm-exporter reads them.
	Compat []string
	// Deprecated are earlier spellings of Name, still accepted, each
	// with a warning at start and a line in --help.
	Deprecated []string
	Category   string
	Usage      string
	// Value binds the flag to its field and holds its default.
	Value Value
	// Check, when set, says what is wrong with the built configuration's
	// value of this flag; Validate prefixes the flag as the user gave it.
	// It is not run when the value did not parse.
	Check func(c *Config) error
}

// problem is a Check's error when bad holds.
func problem(bad bool, format string, args ...any) error {
	if !bad {
		return nil
	}
	return fmt.Errorf(format, args...)
}

// MinReloadPoll is the shortest --collectors-poll-interval: a poll reads
// and hashes the file, which changes at human speed; at 1ns it would spin
// a core.
const MinReloadPoll = 100 * time.Millisecond

// MinAPIMaxBytes is the smallest --api-max-bytes: one GPU's window of one
// field must fit.
const MinAPIMaxBytes = 64 << 10

// EnvVar is the variable of the flag named name: GPUSCOPE_ and the name in
// upper case, with dots and dashes as underscores.
func EnvVar(name string) string {
	return "GPUSCOPE_" + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(name))
}

// EnvVars are every variable the option answers to, its own first.
func (o Option) EnvVars() []string {
	return append([]string{EnvVar(o.Name)}, o.Compat...)
}

// Value is an option's field and default. It is made by String, Bool,
// Int, Int64, Float64, Duration or StringSlice.
type Value interface {
	// Field is the pointer to the field: *string, *bool, *int, *int64,
	// *float64, *time.Duration or *[]string.
	Field() any
	// Default is the field's value when the flag is not given, of the
	// field's type.
	Default() any
	// reset sets the field to the default.
	reset()
}

type value[T any] struct {
	p   *T
	def T
}

func (v value[T]) Field() any   { return v.p }
func (v value[T]) Default() any { return v.def }
func (v value[T]) reset()       { *v.p = v.def }

// String binds a string flag to p, default def.
func String(p *string, def string) Value { return value[string]{p, def} }

// Bool binds a boolean flag to p, default def.
func Bool(p *bool, def bool) Value { return value[bool]{p, def} }

// Int binds an integer flag to p, default def.
func Int(p *int, def int) Value { return value[int]{p, def} }

// Int64 binds a 64-bit integer flag to p, default def.
func Int64(p *int64, def int64) Value { return value[int64]{p, def} }

// Float64 binds a floating-point flag to p, default def.
func Float64(p *float64, def float64) Value { return value[float64]{p, def} }

// Duration binds a Go duration flag to p, default def.
func Duration(p *time.Duration, def time.Duration) Value { return value[time.Duration]{p, def} }

// StringSlice binds a repeatable flag (or comma-separated variable) to p,
// default def. The command line library may not fill a []string through
// a pointer: the command then reads it back with FillSlices after parsing.
func StringSlice(p *[]string, def []string) Value { return value[[]string]{p, def} }

// FillSlices copies the parsed values of the StringSlice options into in,
// by reading each through get (cli.Context.StringSlice, say).
func FillSlices(in *Input, get func(name string) []string) {
	for _, o := range Options(in) {
		if v, ok := o.Value.(value[[]string]); ok {
			*v.p = get(o.Name)
		}
	}
}

// Defaults is what each flag means when it is not given: the defaults of
// Options.
func Defaults() Input {
	var in Input
	for _, o := range Options(&in) {
		o.Value.reset()
	}
	return in
}
