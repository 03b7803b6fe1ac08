package source

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
)

// Kind is one source --source can name, as its package registers it: a
// new source is a package that calls Register from init, and one import in
// source/all, which the program and its configuration read.
type Kind struct {
	// Name is how --source spells it, and the source label of the self
	// metrics.
	Name string
	// Usage describes the name in --source's help, as "sim (simulated
	// GPUs)"; the name alone when empty.
	Usage string
	// Support is the source's own account of the fields it reads, for
	// `gpuscope counters list` and /fields; nil for a source that only
	// serves other sources' (auto).
	Support func() counters.Support
	// Open opens the source.
	Open func(Env) (Source, error)
}

// Env is what a source is opened with: the settings every source shares,
// the settings of the sources that have flags of their own, and the other
// sources.
type Env struct {
	Hostname string
	Log      *logrus.Entry
	// Window is the longest window the engine computes statistics over.
	Window time.Duration
	// BindUnbindPoll is how often a source looks for GPUs bound or unbound;
	// zero keeps the GPUs found at start.
	BindUnbindPoll time.Duration
	// Settings holds, by source name, the typed settings of a source that
	// has flags of its own (dcgm, sim); that source's package says the
	// type.
	Settings map[string]any
	// Open opens another registered source by name, as auto opens its
	// backends.
	Open func(name string) (Source, error)
}

var registry struct {
	sync.RWMutex
	kinds map[string]Kind
}

// Register makes a source known by its name. It is called from the
// source package's init, so a name given twice is a programming error and
// panics.
func Register(k Kind) {
	if k.Name == "" || k.Open == nil {
		panic("source.Register: a source needs a name and an Open")
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.kinds[k.Name]; dup {
		panic(fmt.Sprintf("source.Register: %q registered twice", k.Name))
	}
	if registry.kinds == nil {
		registry.kinds = map[string]Kind{}
	}
	registry.kinds[k.Name] = k
}

// Kinds are the registered sources, by name.
func Kinds() []Kind {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Kind, 0, len(registry.kinds))
	for _, k := range registry.kinds {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Kind) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup returns the registered source of that name.
func Lookup(name string) (Kind, bool) {
	registry.RLock()
	defer registry.RUnlock()
	k, ok := registry.kinds[name]
	return k, ok
}

// Names are the registered sources' names, sorted.
func Names() []string {
	ks := Kinds()
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Name
	}
	return out
}

// Supports are the fields each registered source reads, by name, leaving
// out the sources that read none of their own.
func Supports() []counters.Support {
	var out []counters.Support
	for _, k := range Kinds() {
		if k.Support != nil {
			out = append(out, k.Support())
		}
	}
	return out
}

// OneOf lists names for a message, as "a, b or c".
func OneOf(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Usage describes the registered sources for --source's help, as
// "a (what it is), b, or c".
func Usage() string {
	ks := Kinds()
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Name
		if k.Usage != "" {
			out[i] = k.Usage
		}
	}
	if len(out) < 3 {
		return OneOf(out)
	}
	return strings.Join(out[:len(out)-1], ", ") + ", or " + out[len(out)-1]
}
