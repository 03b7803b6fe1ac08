// Package exporteryaml reads dcgm-exporter's YAML configuration file
// (--config-file, DCGM_EXPORTER_CONFIG_FILE) for the settings gpuscope has.
//
// Two schema versions exist upstream. Version 1 is dcgm-exporter's
// internal/pkg/appconfig/yaml_config.go at commit 7ad58324: metrics.file or
// metrics.fields, and collection.interval with collection.watchGroups.
// Version 2 is the one its chart documents in deployment/README.md (the
// newest stored copy, after 4.8.3): metrics.enableExporterMetrics,
// server.maxConcurrentScrapes, sources.dcgm.watch, sources.dcgm.detectBindUnbind
// and a list of named collections, each with an `every` and the fields it
// includes. As upstream, keys the schema does not have are refused, and the
// two versions cannot be mixed.
//
// Groups of fields at their own interval (version 1's watchGroups, version
// 2's collections of some fields) set the interval of the counters lines
// they match (WatchGroups.Apply). A setting gpuscope has no equivalent for
// is refused with the file, the line and the key, and what to do instead;
// nothing is silently dropped.
package exporteryaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	pathpkg "path"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/counters"
)

// maxFileBytes bounds the file read: the largest real configuration is a
// few kilobytes.
const maxFileBytes = 1 << 20

// Settings are the values a file sets; a nil pointer is a key the file
// does not set.
type Settings struct {
	Version int
	// CountersFile is metrics.file.
	CountersFile string
	// CollectInterval is collection.interval (version 1) or the `every` of
	// the collection that includes every field (version 2).
	CollectInterval *time.Duration
	// EnableExporterMetrics is metrics.enableExporterMetrics.
	EnableExporterMetrics *bool
	// MaxConcurrentScrapes is server.maxConcurrentScrapes.
	MaxConcurrentScrapes *int
	// WatchMaxKeepAge and WatchMaxKeepSamples are sources.dcgm.watch.
	WatchMaxKeepAge     *time.Duration
	WatchMaxKeepSamples *int64
	// BindUnbind and BindUnbindPoll are sources.dcgm.detectBindUnbind.
	BindUnbind     *bool
	BindUnbindPoll *time.Duration
	// WatchGroups are collection.watchGroups (version 1) or the
	// collections of some fields (version 2): fields at their own interval.
	WatchGroups WatchGroups
}

// Load reads and parses the file at path.
func Load(path string) (*Settings, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the YAML configuration: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the YAML configuration %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes; not a dcgm-exporter configuration", path, maxFileBytes)
	}
	return Parse(path, data)
}

// Parse reads one file's content; name is used in messages.
func Parse(name string, data []byte) (*Settings, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty; a dcgm-exporter configuration starts with version: 1 or 2", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: holds more than one YAML document (dcgm-exporter reads one)", name)
	}
	p := &parser{name: name}
	p.document(&doc)
	if p.err != nil {
		return nil, p.err
	}
	return &p.s, nil
}

// parser walks the document, keeping the first problem.
type parser struct {
	name string
	s    Settings
	err  error
}

func (p *parser) fail(n *yaml.Node, key, format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%s:%d: %s: %s", p.name, n.Line, key, fmt.Sprintf(format, args...))
	}
}

// field is one key of a mapping and its value node.
type field struct {
	key  *yaml.Node
	name string
	val  *yaml.Node
}

// mapping lists n's keys, refusing anything but a mapping of scalar keys
// without repeats, and keys outside allowed.
func (p *parser) mapping(n *yaml.Node, path string, allowed ...string) []field {
	if n.Kind != yaml.MappingNode {
		p.fail(n, path, "want a mapping")
		return nil
	}
	var out []field
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		full := join(path, k.Value)
		switch {
		case k.Kind != yaml.ScalarNode:
			p.fail(k, path, "keys must be plain names")
		case seen[k.Value]:
			p.fail(k, full, "given twice")
		case !contains(allowed, k.Value):
			p.fail(k, full, "not a key of dcgm-exporter's configuration (here: %s)", strings.Join(allowed, ", "))
		}
		seen[k.Value] = true
		out = append(out, field{key: k, name: k.Value, val: v})
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (p *parser) document(doc *yaml.Node) {
	root := doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	fields := p.mapping(root, "", "version", "metrics", "collection", "collections", "sources", "server")
	if p.err != nil {
		return
	}
	byName := map[string]field{}
	for _, f := range fields {
		byName[f.name] = f
	}
	v, ok := byName["version"]
	if !ok {
		p.fail(root, "version", "missing; dcgm-exporter's configuration starts with version: 1 or 2")
		return
	}
	p.s.Version = p.integer(v.val, "version")
	switch p.s.Version {
	case 1:
		for _, k := range []string{"collections", "sources", "server"} {
			if f, ok := byName[k]; ok {
				p.fail(f.key, k, "a version 2 key; version 1 has metrics and collection only (the versions cannot be mixed)")
			}
		}
	case 2:
		if f, ok := byName["collection"]; ok {
			p.fail(f.key, "collection", "the version 1 key; version 2 uses collections (the versions cannot be mixed)")
		}
	default:
		if p.err == nil {
			p.fail(v.val, "version", "%d: gpuscope reads versions 1 and 2", p.s.Version)
		}
	}
	for _, f := range fields {
		switch f.name {
		case "metrics":
			p.metrics(f.val)
		case "collection":
			p.collection(f.val)
		case "collections":
			p.collections(f.val)
		case "sources":
			p.sources(f.val)
		case "server":
			for _, g := range p.mapping(f.val, "server", "maxConcurrentScrapes") {
				n := p.integer(g.val, "server.maxConcurrentScrapes")
				if n < 1 && p.err == nil {
					p.fail(g.val, "server.maxConcurrentScrapes", "%d: at least 1", n)
				}
				p.s.MaxConcurrentScrapes = &n
			}
		}
	}
}

func (p *parser) metrics(n *yaml.Node) {
	keys := []string{"file", "fields"}
	if p.s.Version == 2 {
		keys = append(keys, "enableExporterMetrics")
	}
	var file, fields *field
	for _, f := range p.mapping(n, "metrics", keys...) {
		switch f.name {
		case "file":
			file = &f
			p.s.CountersFile = strings.TrimSpace(p.scalar(f.val, "metrics.file"))
		case "fields":
			fields = &f
		case "enableExporterMetrics":
			b := p.boolean(f.val, "metrics.enableExporterMetrics")
			p.s.EnableExporterMetrics = &b
		}
	}
	switch {
	case file != nil && fields != nil:
		p.fail(fields.key, "metrics", "give exactly one of file or fields, as dcgm-exporter requires")
	case fields != nil:
		p.fail(fields.key, "metrics.fields", "inline field definitions are not read by gpuscope: write them as counters CSV lines (name, type, help) and name that file in metrics.file")
	case file != nil && p.s.CountersFile == "":
		p.fail(file.val, "metrics.file", "empty; name a counters CSV file")
	}
}

func (p *parser) collection(n *yaml.Node) {
	for _, f := range p.mapping(n, "collection", "interval", "watchGroups") {
		switch f.name {
		case "interval":
			d := p.duration(f.val, "collection.interval", false)
			p.s.CollectInterval = &d
		case "watchGroups":
			p.watchGroups(f.val)
		}
	}
}

func (p *parser) collections(n *yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "collections", "want a list of collections")
		return
	}
	for i, c := range n.Content {
		path := "collections[" + strconv.Itoa(i) + "]"
		var every *time.Duration
		var name string
		var include []string
		all := false
		for _, f := range p.mapping(c, path, "name", "every", "metrics", "sources") {
			switch f.name {
			case "name":
				name = strings.TrimSpace(p.scalar(f.val, path+".name"))
			case "every":
				d := p.duration(f.val, path+".every", false)
				every = &d
			case "metrics":
				include, all = p.includes(f.val, path+".metrics")
			case "sources":
				p.watchSources(f.val, path+".sources", false)
			}
		}
		if p.err != nil {
			return
		}
		if every == nil {
			p.fail(c, path+".every", "missing")
			return
		}
		if !all {
			p.addGroup(c, path, name, *every, include)
			continue
		}
		if p.s.CollectInterval != nil {
			p.fail(c, path, "a second collection of every field")
			return
		}
		p.s.CollectInterval = every
	}
}

// includes reads a collection's metrics: its field names or patterns, and
// whether it includes every field (include: ["*"]).
func (p *parser) includes(n *yaml.Node, path string) ([]string, bool) {
	var out []string
	for _, f := range p.mapping(n, path, "include") {
		out = p.names(f.val, path+".include")
	}
	return out, len(out) == 1 && out[0] == "*"
}

// names reads a list of field names or patterns.
func (p *parser) names(n *yaml.Node, path string) []string {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.fail(n, path, "want a list of field names or patterns")
		return nil
	}
	var out []string
	for i, v := range n.Content {
		s := strings.TrimSpace(p.scalar(v, path))
		if s == "" && p.err == nil {
			p.fail(v, fmt.Sprintf("%s[%d]", path, i), "empty")
		}
		out = append(out, s)
	}
	return out
}

// watchGroups reads version 1's collection.watchGroups.
func (p *parser) watchGroups(n *yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "collection.watchGroups", "want a list of watch groups")
		return
	}
	for i, g := range n.Content {
		path := "collection.watchGroups[" + strconv.Itoa(i) + "]"
		var name string
		var iv *time.Duration
		var fields []string
		for _, f := range p.mapping(g, path, "name", "interval", "fields") {
			switch f.name {
			case "name":
				name = strings.TrimSpace(p.scalar(f.val, path+".name"))
			case "interval":
				d := p.duration(f.val, path+".interval", false)
				iv = &d
			case "fields":
				fields = p.names(f.val, path+".fields")
			}
		}
		if p.err != nil {
			return
		}
		switch {
		case iv == nil:
			p.fail(g, path+".interval", "missing")
		case fields == nil:
			p.fail(g, path+".fields", "missing")
		default:
			p.addGroup(g, path, name, *iv, fields)
		}
	}
}

// addGroup keeps one group of fields at their own interval, refusing what
// dcgm-exporter refuses (a missing or repeated name) and intervals gpuscope
// cannot sample at.
func (p *parser) addGroup(n *yaml.Node, path, name string, iv time.Duration, patterns []string) {
	if name == "" {
		p.fail(n, path+".name", "missing")
		return
	}
	for _, g := range p.s.WatchGroups {
		if g.Name == name {
			p.fail(n, path+".name", "%q is given twice", name)
			return
		}
	}
	if iv < counters.MinInterval {
		p.fail(n, path, "%s: gpuscope samples at most every %s", iv, counters.MinInterval)
		return
	}
	for _, pat := range patterns {
		if _, err := pathpkg.Match(pat, ""); err != nil {
			p.fail(n, path, "%q is not a glob pattern: %v", pat, err)
			return
		}
	}
	p.s.WatchGroups = append(p.s.WatchGroups, WatchGroup{Name: name, Interval: iv, Patterns: patterns,
		Where: fmt.Sprintf("%s:%d: %s", p.name, n.Line, path)})
}

func (p *parser) sources(n *yaml.Node) {
	p.watchSources(n, "sources", true)
}

// watchSources reads sources.dcgm; the top level also takes
// detectBindUnbind.
func (p *parser) watchSources(n *yaml.Node, path string, top bool) {
	for _, s := range p.mapping(n, path, "dcgm") {
		keys := []string{"watch"}
		if top {
			keys = append(keys, "detectBindUnbind")
		}
		dp := path + ".dcgm"
		for _, f := range p.mapping(s.val, dp, keys...) {
			switch f.name {
			case "watch":
				p.watch(f.val, dp+".watch", top)
			case "detectBindUnbind":
				for _, g := range p.mapping(f.val, dp+".detectBindUnbind", "enabled", "pollInterval") {
					if g.name == "enabled" {
						b := p.boolean(g.val, dp+".detectBindUnbind.enabled")
						p.s.BindUnbind = &b
					} else {
						d := p.duration(g.val, dp+".detectBindUnbind.pollInterval", false)
						p.s.BindUnbindPoll = &d
					}
				}
			}
		}
	}
}

// watch reads a field-watch retention policy. gpuscope keeps its own
// rings, so a collection's policy is only checked; the top level's is
// kept so that the flags' warning names it.
func (p *parser) watch(n *yaml.Node, path string, keep bool) {
	for _, f := range p.mapping(n, path, "maxKeepAge", "maxKeepSamples") {
		if f.name == "maxKeepAge" {
			d := p.duration(f.val, path+".maxKeepAge", true)
			if keep {
				p.s.WatchMaxKeepAge = &d
			}
			continue
		}
		v := int64(p.integer(f.val, path+".maxKeepSamples"))
		if v < 0 && p.err == nil {
			p.fail(f.val, path+".maxKeepSamples", "%d: use 0 or more", v)
		}
		if keep {
			p.s.WatchMaxKeepSamples = &v
		}
	}
}

func (p *parser) scalar(n *yaml.Node, path string) string {
	if n.Kind != yaml.ScalarNode {
		p.fail(n, path, "want a single value")
		return ""
	}
	return n.Value
}

func (p *parser) integer(n *yaml.Node, path string) int {
	s := p.scalar(n, path)
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil && p.err == nil {
		p.fail(n, path, "%q: want a whole number", s)
	}
	return v
}

func (p *parser) boolean(n *yaml.Node, path string) bool {
	s := p.scalar(n, path)
	switch strings.TrimSpace(s) {
	case "true":
		return true
	case "false":
		return false
	}
	if p.err == nil {
		p.fail(n, path, "%q: want true or false", s)
	}
	return false
}

// duration reads a Go duration; zero is refused unless zeroOK, as
// dcgm-exporter's intervals must be positive.
func (p *parser) duration(n *yaml.Node, path string, zeroOK bool) time.Duration {
	s := strings.TrimSpace(p.scalar(n, path))
	d, err := time.ParseDuration(s)
	switch {
	case p.err != nil:
	case err != nil:
		p.fail(n, path, "%q: want a Go duration such as 30s or 500ms", s)
	case d < 0 || (d == 0 && !zeroOK):
		p.fail(n, path, "%q: must be greater than 0", s)
	}
	return d
}
