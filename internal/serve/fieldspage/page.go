// Package fieldspage serves /fields, where an operator ticks the counters a
// node should collect and sees what they cost, and /fields.csv, the
// counters file (or ConfigMap, or Helm values) of that choice.
package fieldspage

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/cost"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
	"github.com/gpuscope/gpuscope/source"
)

//go:embed assets
var assets embed.FS

// SampleReader reads the engine's rings, for the sparklines.
type SampleReader interface {
	Samples(q sampleapi.Query) (*sampleapi.Result, error)
}

// Options are what the page reads. The exposition, the entities and the
// samples are read at most once a second (and once per running counters
// file), whatever the requests; the rest is asked per request.
type Options struct {
	// Supports are each source's account of the fields it reads.
	Supports []counters.Support
	// Source names the source feeding the engine now: dcgm, nvml or sim.
	Source func() string
	// Running is the counters file the engine runs.
	Running func() *counters.Set
	// Exposition is the /metrics body as a scrape gets it now.
	Exposition func() []byte
	// Entities are the entities the source sees; nil is none.
	Entities func() []*source.Entity
	// Samples feeds the sparklines of profiling fields; nil leaves them out.
	Samples SampleReader
	// Window is --window, which the window families' help text names.
	Window time.Duration
	Log    *logrus.Entry
	// Now is the clock that ages the parsed exposition; time.Now when nil.
	Now func() time.Time
}

// Paths the handler answers.
const (
	PagePath = "/fields"
	CSVPath  = "/fields.csv"
)

// Handler serves PagePath and CSVPath.
type Handler struct {
	opts Options
	page *template.Template
	css  template.CSS
	js   template.JS

	modelMu sync.Mutex // guards cached, and is held while it is built
	cached  *model
}

// New parses the embedded page.
func New(opts Options) (*Handler, error) {
	if opts.Log == nil {
		opts.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	page, err := template.New("page.html").Funcs(template.FuncMap{"bytes": humanBytes}).ParseFS(assets, "assets/page.html")
	if err != nil {
		return nil, err
	}
	css, err := assets.ReadFile("assets/page.css")
	if err != nil {
		return nil, err
	}
	js, err := assets.ReadFile("assets/page.js")
	if err != nil {
		return nil, err
	}
	// Both files are ours, embedded at build time: trusted content.
	return &Handler{opts: opts, page: page, css: template.CSS(css), js: template.JS(js)}, nil
}

// ServeHTTP answers GET and HEAD of the two paths.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "use GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case PagePath:
		h.servePage(w, r)
	case CSVPath:
		h.serveCSV(w, r)
	default:
		http.NotFound(w, r)
	}
}

// answerBad writes a query's error: 400 for what the user can fix.
func answerBad(w http.ResponseWriter, err error) {
	var se *selectionError
	if errors.As(err, &se) {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// Downloads /fields.csv offers, by its format parameter.
var formats = map[string]struct{ contentType, file string }{
	"":          {"text/csv; charset=utf-8", "counters.csv"},
	"csv":       {"text/csv; charset=utf-8", "counters.csv"},
	"configmap": {"application/yaml; charset=utf-8", "gpuscope-counters.yaml"},
	"values":    {"application/yaml; charset=utf-8", "gpuscope-values.yaml"},
}

func (h *Handler) serveCSV(w http.ResponseWriter, r *http.Request) {
	fields, _, err := parseSelection(r.URL.RawQuery)
	if err != nil {
		answerBad(w, err)
		return
	}
	format := r.URL.Query().Get("format")
	fm, ok := formats[format]
	if !ok {
		http.Error(w, "format "+format+": want csv, configmap or values", http.StatusBadRequest)
		return
	}
	if len(fields) == 0 {
		http.Error(w, "field: tick at least one field (field=NAME)", http.StatusBadRequest)
		return
	}
	body, err := render(fields, format)
	if err != nil {
		// parseSelection refuses what a file could not load with; what is
		// left is still the client's selection, not a fault of the server,
		// and a client can ask for it as often as it likes.
		h.opts.Log.WithError(err).Debug("The counters file of a selection does not load")
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", fm.contentType)
	w.Header().Set("Content-Disposition", `attachment; filename="`+fm.file+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(body))
}

// render writes the selection in a format, after checking that the
// counters file loads as gpuscope would load it.
func render(fields []counters.Field, format string) (string, error) {
	csv := countersCSV(fields)
	if _, err := counters.Parse(CSVPath, strings.NewReader(csv)); err != nil {
		return "", err
	}
	switch format {
	case "configmap":
		return configMap(csv), nil
	case "values":
		return helmValues(csv), nil
	}
	return csv, nil
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	sel, chosen, err := parseSelection(r.URL.RawQuery)
	if err != nil {
		answerBad(w, err)
		return
	}
	v := h.build(sel, chosen)
	var b bytes.Buffer
	if err := h.page.Execute(&b, v); err != nil {
		h.opts.Log.WithError(err).Error("Rendering /fields failed")
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Everything is inline and our own; nothing is loaded from elsewhere.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; connect-src 'self'; form-action 'self'")
	_, _ = w.Write(b.Bytes())
}

// costView is a cost as the page shows it.
type costView struct {
	Series int
	Bytes  int
	// SamplesPerSecond at a 15 s scrape, one decimal, as the script writes it.
	SamplesPerSecond string
}

func viewCost(f cost.Family) costView {
	return costView{Series: f.Series, Bytes: f.Bytes, SamplesPerSecond: oneDecimal(cost.SamplesPerSecond(f.Series, cost.Scrape))}
}
