package exposition

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// unit is one table row, paragraph or list item of docs/metrics.md.
type unit struct {
	section string
	// cells are a table row's cells by column name; nil for prose.
	cells map[string]string
	text  string
}

var tickRE = regexp.MustCompile("`([^`]+)`")

// ticks are the backticked words of s.
func ticks(s string) []string {
	var out []string
	for _, m := range tickRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

func hasTick(s, word string) bool {
	for _, t := range ticks(s) {
		if t == word {
			return true
		}
	}
	return false
}

// readUnits splits a Markdown page into its table rows, paragraphs and
// list items, each with its section; fenced code is left out.
func readUnits(page string) []unit {
	var (
		out     []unit
		section string
		header  []string
		para    []string
		fenced  bool
	)
	flush := func() {
		if len(para) > 0 {
			out = append(out, unit{section: section, text: strings.Join(para, " ")})
			para = nil
		}
	}
	for _, line := range strings.Split(page, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			flush()
			fenced = !fenced
		case fenced:
		case strings.HasPrefix(line, "#"):
			flush()
			section, header = strings.TrimSpace(strings.TrimLeft(line, "#")), nil
		case strings.HasPrefix(line, "|"):
			flush()
			cells := splitRow(line)
			switch {
			case header == nil:
				header = cells
			case strings.HasPrefix(strings.TrimSpace(cells[0]), "---"):
			default:
				u := unit{section: section, cells: map[string]string{}, text: line}
				for i, c := range cells {
					if i < len(header) {
						u.cells[header[i]] = c
					}
				}
				out = append(out, u)
			}
		case strings.TrimSpace(line) == "":
			flush()
			header = nil
		case strings.HasPrefix(line, "- "):
			flush()
			para = append(para, line)
		default:
			para = append(para, line)
		}
	}
	flush()
	return out
}

func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	// An escaped bar (\|) is part of a cell.
	parts := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(strings.ReplaceAll(p, "\x00", "|"))
	}
	return parts
}

// metricsDoc is what docs/metrics.md says of families and labels.
type metricsDoc struct {
	units []unit
	// named are the families a row of a table of families names.
	named map[string]bool
	// labels are the labels the row of each family lists, and identity
	// whether it says the family carries its entity's identity.
	labels   map[string]map[string]bool
	identity map[string]bool
	// identityLabels are the labels of an entity: the Labels section's
	// and those of nvidia_gpu_exporter's layout.
	identityLabels map[string]bool
	// fieldsByName says the fields of the counters file are exported under
	// their own names.
	fieldsByName bool
	// prefixes are the clientGolangPrefixes the page documents.
	prefixes []string
}

// clientGolangPrefixes are the families of client_golang's Go and process
// collectors: the page documents them by prefix (`go_*`), as client_golang
// names them and writes their help.
var clientGolangPrefixes = []string{"go_", "process_"}

var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func readMetricsDoc(t *testing.T) *metricsDoc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "docs", "metrics.md"))
	require.NoError(t, err)
	d := &metricsDoc{units: readUnits(string(b)), named: map[string]bool{}, labels: map[string]map[string]bool{},
		identity: map[string]bool{}, identityLabels: map[string]bool{}}
	d.fieldsByName = strings.Contains(strings.Join(strings.Fields(string(b)), " "), "exports the fields of its counters CSV under their CSV names")
	var previous string
	for _, u := range d.units {
		d.readIdentity(u)
		for _, p := range clientGolangPrefixes {
			if hasTick(u.text, p+"*") {
				d.prefixes = append(d.prefixes, p)
			}
		}
		names, ok := u.cells["name"]
		if u.cells == nil || !ok {
			continue
		}
		cell := u.cells["labels"]
		if cell == "as above" {
			cell = previous
		}
		previous = cell
		// nvidia_gpu_exporter's table says where a name is written: on a
		// GPU or a MIG instance it carries that layout's identity.
		on := u.cells["on"]
		identity := strings.Contains(cell, "identity") || on == "GPU" || on == "MIG instance"
		for _, n := range ticks(names) {
			d.named[n] = true
			if d.labels[n] == nil {
				d.labels[n] = map[string]bool{}
			}
			for _, l := range ticks(cell) {
				d.labels[n][l] = true
			}
			if identity {
				d.identity[n] = true
			}
		}
	}
	return d
}

// readIdentity collects the labels of entities: the first column of the
// Labels table, the labels of each entity kind, the pod-label examples, and
// the labels nvidia_gpu_exporter's layout writes (its list items).
func (d *metricsDoc) readIdentity(u unit) {
	var words []string
	switch {
	case u.section == "Labels" && u.cells != nil:
		words = ticks(u.cells["label"] + " " + u.cells["labels"])
		if u.cells["label"] == "`<key>`" {
			words = append(words, ticks(u.cells["value"])...)
		}
	case strings.HasPrefix(u.section, "nvidia_gpu_exporter") && strings.HasPrefix(u.text, "- "):
		words = ticks(u.text)
	}
	for _, w := range words {
		if labelNameRE.MatchString(w) {
			d.identityLabels[w] = true
		}
	}
}

// docKey is the name under which docs/metrics.md documents a family: its
// own, or the pattern of the series gpuscope derives from a field.
func docKey(name string) (key string, field bool) {
	for _, suffix := range []string{"_window_samples", "_window", engine.HistogramSuffix} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if _, known := counters.Lookup(base); known {
				return "<FIELD>" + suffix, true
			}
		}
	}
	_, known := counters.Lookup(name)
	return name, known
}

// documented says whether the page documents the family.
func (d *metricsDoc) documented(name string) bool {
	key, field := docKey(name)
	if d.named[key] || (field && key == name && d.fieldsByName) {
		return true
	}
	return d.byPrefix(name)
}

func (d *metricsDoc) byPrefix(name string) bool {
	for _, p := range d.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// labelDocumented says whether the page documents label l on family name:
// in the family's row, as part of the identity its row (or, for a field,
// the Labels section) gives it, or in a sentence or row that names both.
func (d *metricsDoc) labelDocumented(name, l string) bool {
	key, field := docKey(name)
	if d.labels[key][l] || d.byPrefix(name) {
		return true
	}
	if d.identity[key] || field {
		if d.identityLabels[l] {
			return true
		}
		// Label-type fields label every series of their entity.
		if _, ok := counters.Lookup(l); ok {
			return true
		}
	}
	for _, u := range d.units {
		if hasTick(u.text, key) && hasTick(u.text, l) {
			return true
		}
	}
	return false
}

// Every family gpuscope can expose, and every label of it, is documented in
// docs/metrics.md, as kube-state-metrics requires of its own.
func TestEveryFamilyAndLabelIsDocumented(t *testing.T) {
	x := everything(t)
	doc := readMetricsDoc(t)
	require.True(t, doc.fieldsByName, "docs/metrics.md no longer says that fields are exported under their CSV names")
	require.Subset(t, doc.prefixes, clientGolangPrefixes, "docs/metrics.md documents client_golang's families by their prefixes")
	require.True(t, doc.identityLabels["UUID"] && doc.identityLabels["uuid"], "docs/metrics.md's Labels table and nvidia_gpu_exporter's list give the labels of an entity")
	var missing []string
	for _, name := range x.families.names() {
		f := x.families[name]
		if !doc.documented(name) {
			missing = append(missing, name+" (family, seen in "+f.from+")")
			continue
		}
		var labels []string
		for l := range f.labels {
			labels = append(labels, l)
		}
		sort.Strings(labels)
		for _, l := range labels {
			if !doc.labelDocumented(name, l) {
				missing = append(missing, name+" label "+l+" (seen in "+f.from+")")
			}
		}
	}
	assert.Empty(t, missing, "docs/metrics.md does not document these families and labels:\n%s", strings.Join(missing, "\n"))
}
