// Package exposition checks gpuscope's exposition as a whole: promtool
// passes every family gpuscope names itself, and docs/metrics.md documents
// every family gpuscope can expose with every label it carries.
package exposition

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// family is one metric family gpuscope can expose, with every label name
// seen on it.
type family struct {
	name   string
	labels map[string]bool
	// from is where it was first seen: a golden file or a scenario.
	from string
}

// families are the families found so far, by name.
type families map[string]*family

func (fs families) get(name, from string) *family {
	f := fs[name]
	if f == nil {
		f = &family{name: name, labels: map[string]bool{}, from: from}
		fs[name] = f
	}
	return f
}

// addFamilies records parsed or gathered families with their labels.
func (fs families) addFamilies(from string, mfs []*dto.MetricFamily) {
	for _, mf := range mfs {
		f := fs.get(mf.GetName(), from)
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				f.labels[l.GetName()] = true
			}
		}
	}
}

// descRE reads the name and labels of a prometheus.Desc's String(), the
// only way client_golang shows a description's labels.
var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: .*, constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// addDescs records what a collector says it may expose: its families
// appear there even before they have a series.
func (fs families) addDescs(t *testing.T, from string, c prometheus.Collector) {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		require.NotNil(t, m, "%s: cannot read the description %s", from, d)
		f := fs.get(m[1], from)
		for _, pair := range splitNonEmpty(m[2]) {
			name, _, _ := strings.Cut(pair, "=")
			f.labels[name] = true
		}
		for _, name := range splitNonEmpty(m[3]) {
			f.labels[name] = true
		}
	}
}

func splitNonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (fs families) names() []string {
	out := make([]string, 0, len(fs))
	for n := range fs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// golden is one golden exposition of the tree.
type golden struct {
	rel  string
	body []byte
}

// goldenExpositions finds every golden exposition of the tree: the .prom
// files of a testdata folder.
func goldenExpositions(t *testing.T) []golden {
	t.Helper()
	root := e2etest.RepoRoot()
	var out []golden
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Ext(p) != ".prom" || filepath.Base(filepath.Dir(p)) != "testdata" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, golden{rel: filepath.ToSlash(rel), body: b})
		return nil
	})
	require.NoError(t, err)
	return out
}

// parseText reads a text exposition.
func parseText(t *testing.T, what string, body []byte) []*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err, "%s does not parse", what)
	out := make([]*dto.MetricFamily, 0, len(mfs))
	for _, mf := range mfs {
		out = append(out, mf)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// exposure is everything gpuscope can expose: the families with their
// labels, and the text expositions they came from, for promtool.
type exposure struct {
	families families
	// texts are the text expositions of the goldens, of the scenarios and
	// of their registered collectors, by what produced them.
	texts map[string][]byte
}

var (
	exposureOnce sync.Once
	exposureOf   *exposure
)

// everything collects, once per test binary, the families of the golden
// expositions, of the engine rendered in the scenarios of scenarios_test.go,
// and of the descriptions of every collector the command registers.
func everything(t *testing.T) *exposure {
	t.Helper()
	exposureOnce.Do(func() {
		x := &exposure{families: families{}, texts: map[string][]byte{}}
		for _, g := range goldenExpositions(t) {
			x.families.addFamilies(g.rel, parseText(t, g.rel, g.body))
			x.texts[g.rel] = g.body
		}
		for _, sc := range scenarios(t) {
			if sc.text != nil {
				x.families.addFamilies(sc.name, parseText(t, sc.name, sc.text))
				x.families.addFamilies(sc.name+" (protobuf)", sc.proto)
				x.texts[sc.name] = sc.text
			}
			for _, c := range sc.collectors {
				x.families.addDescs(t, sc.name, c)
			}
			x.texts[sc.name+" (registered collectors)"] = gathered(t, sc.collectors)
		}
		// nvidia_gpu_exporter's collection lines are written only by the
		// engine's own loops, which the scenarios do not run: their names
		// come from the table that defines them.
		for _, c := range counters.NvidiaGPUExporterNames() {
			if c.Type != counters.Label {
				x.families.get(c.Name, "counters.NvidiaGPUExporterNames")
			}
		}
		exposureOf = x
	})
	require.NotNil(t, exposureOf, "collecting the exposition failed in an earlier test")
	return exposureOf
}

// notMetrics are the gpuscope_ names of the code that name no metric.
var notMetrics = map[string]string{
	"gpuscope_health": "the DCGM entity group of the health checks (source/dcgm)",
}

var ownNameRE = regexp.MustCompile(`^gpuscope_[a-z0-9_]*[a-z0-9]$`)

// The scenarios expose every family the code names: each gpuscope_ name
// written in the exporter's code is among the families collected, so that a
// new family cannot escape the checks of this package for want of a
// scenario that shows it.
func TestTheScenariosShowEveryFamilyTheCodeNames(t *testing.T) {
	x := everything(t)
	root := e2etest.RepoRoot()
	var unseen []string
	for _, dir := range []string{"cmd", "internal", "source", "counters"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			for _, name := range ownNames(t, p) {
				if x.families[name] == nil && notMetrics[name] == "" {
					rel, _ := filepath.Rel(root, p)
					unseen = append(unseen, name+" ("+filepath.ToSlash(rel)+")")
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	assert.Empty(t, unseen, "named in the code but exposed by no golden file or scenario of this package: add a scenario that shows them")
}

// ownNames are the gpuscope_ names among a Go file's string literals.
func ownNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	require.NoError(t, err)
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if v, err := strconv.Unquote(lit.Value); err == nil && ownNameRE.MatchString(v) {
				out = append(out, v)
			}
		}
		return true
	})
	return out
}

// gathered is what a scrape shows of the collectors, in the text format.
func gathered(t *testing.T, cs []prometheus.Collector) []byte {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cs...)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var b bytes.Buffer
	for _, mf := range mfs {
		_, err := expfmt.MetricFamilyToText(&b, mf)
		require.NoError(t, err)
	}
	return b.Bytes()
}
