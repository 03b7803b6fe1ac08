package fieldspage

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gpuscope/gpuscope/counters"
)

// maxQuery bounds the query string of /fields and /fields.csv, as the HTTP
// server bounds request headers. The page's form sends an interval
// parameter per field listed (about 16 KiB for DCGM's whole catalog), so
// every field ticked with a few statistics each still fits.
const maxQuery = 64 << 10

// Query parameters. field names the ticked fields (repeated or
// comma-separated); interval.NAME and stats.NAME set one field's watch
// interval and window statistics (stats repeated or space-separated);
// chosen marks a submitted form, so that ticking nothing is told apart
// from a first visit, which starts from the running counters file.
const (
	paramField    = "field"
	paramInterval = "interval."
	paramStats    = "stats."
	paramChosen   = "chosen"
)

// selectionError is a query a user can fix; it is answered 400.
type selectionError struct{ msg string }

func (e *selectionError) Error() string { return e.msg }

func badQuery(format string, args ...any) error {
	return &selectionError{msg: fmt.Sprintf(format, args...)}
}

// parseSelection reads the fields of a query, in catalog order, each with
// its interval and statistics. Unknown names are refused, naming the field
// and the closest known name.
func parseSelection(rawQuery string) ([]counters.Field, bool, error) {
	if len(rawQuery) > maxQuery {
		return nil, false, badQuery("the query is %d bytes, more than the %d this page takes", len(rawQuery), maxQuery)
	}
	v, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, false, badQuery("the query does not parse: %v", err)
	}
	chosen := v.Has(paramChosen) || v.Has(paramField)
	want := map[string]bool{}
	for _, raw := range v[paramField] {
		for _, name := range strings.Split(raw, ",") {
			if name = strings.TrimSpace(name); name != "" {
				want[name] = true
			}
		}
	}
	var out []counters.Field
	seen := map[uint16]bool{}
	for name := range want {
		info, ok := counters.Lookup(name)
		if !ok || !info.Described() {
			msg := fmt.Sprintf("field %q: not a field gpuscope knows", name)
			if s := counters.Suggest(name); s != "" {
				msg += "; did you mean " + s + "?"
			}
			return nil, false, badQuery("%s", msg)
		}
		// A legacy or deprecated name is written under the current one.
		if c, ok := counters.ByID(info.ID); ok {
			info = c
		}
		if seen[info.ID] {
			continue
		}
		seen[info.ID] = true
		f := counters.Field{Name: info.Name, ID: info.ID, Type: info.Type, Help: info.Help}
		if err := readOptions(v, &f); err != nil {
			return nil, false, err
		}
		out = append(out, f)
	}
	sortFields(out)
	return out, chosen, nil
}

// readOptions reads the interval and statistics a query sets for f.
func readOptions(v url.Values, f *counters.Field) error {
	if s := strings.TrimSpace(v.Get(paramInterval + f.Name)); s != "" {
		d, err := counters.ParseInterval(s)
		if err != nil {
			return badQuery("%s%s: %v", paramInterval, f.Name, err)
		}
		if d < counters.MinInterval || d > time.Hour {
			return badQuery("%s%s: %s is outside %s to 1h", paramInterval, f.Name, d, counters.MinInterval)
		}
		f.Interval = d
	}
	want := map[string]bool{}
	for _, raw := range v[paramStats+f.Name] {
		for _, word := range strings.Fields(strings.ReplaceAll(raw, ",", " ")) {
			want[strings.ToLower(word)] = true
		}
	}
	for _, st := range counters.AllStats {
		if want[st.String()] {
			f.Stats = append(f.Stats, st)
			delete(want, st.String())
		}
	}
	for word := range want {
		return badQuery("%s%s: unknown statistic %q (want any of %s)", paramStats, f.Name, word, strings.Join(counters.StatNames(), " "))
	}
	if f.Type == counters.Label && (f.Interval != 0 || len(f.Stats) > 0) {
		return badQuery("%s is a label field: it takes no watch interval or window statistics", f.Name)
	}
	if f.Type == counters.Counter && len(f.Stats) > 0 {
		return badQuery("%s is a counter: window statistics apply to gauges only (%s%s)", f.Name, paramStats, f.Name)
	}
	return nil
}

// sortFields orders fields by ID, as the catalog lists them.
func sortFields(fs []counters.Field) {
	slices.SortFunc(fs, func(a, b counters.Field) int {
		if c := cmp.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}
