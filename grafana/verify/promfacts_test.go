package verify

import "regexp"

// What each Prometheus feature the rules may use needs of the server, from
// Prometheus' release notes (its CHANGELOG.md).

// need is what a rule's use of a Prometheus feature asks of the server: the
// first release where it works as the rules need it, and where applicable
// the feature flag or setting it needs there.
type need struct {
	what   string // the feature, as docs/kubernetes.md names it: a function, a field, ...
	since  version
	flag   string // --enable-feature value on every release that has it; "" when none
	source string // the release note or pull request the fact comes from
}

// The release notes are Prometheus' CHANGELOG.md; "2.0" stands for features
// every Prometheus 2 has.
var classic = need{since: version{2, 0}, source: "Prometheus 2.0"}

func fn(since version, source string) need { return need{since: since, source: source} }

func experimental(since version, source string) need {
	return need{since: since, flag: "promql-experimental-functions", source: source}
}

var fillModifier = need{since: version{3, 10}, flag: "promql-binop-fill-modifiers",
	source: "3.10.0: fill(), fill_left() and fill_right() binop modifiers (#17644)"}

// promqlCalls: functions and aggregation operators, by the release that
// brought them.
var promqlCalls = map[string]need{
	"abs": classic, "absent": classic, "ceil": classic, "changes": classic, "clamp_max": classic,
	"clamp_min": classic, "day_of_month": classic, "day_of_week": classic, "days_in_month": classic,
	"delta": classic, "deriv": classic, "exp": classic, "floor": classic, "histogram_quantile": classic,
	"hour": classic, "idelta": classic, "increase": classic, "irate": classic, "label_join": classic,
	"label_replace": classic, "ln": classic, "log2": classic, "log10": classic, "minute": classic,
	"month": classic, "predict_linear": classic, "rate": classic, "resets": classic, "round": classic,
	"scalar": classic, "sort": classic, "sort_desc": classic, "sqrt": classic, "time": classic,
	"timestamp": classic, "vector": classic, "year": classic, "avg_over_time": classic,
	"min_over_time": classic, "max_over_time": classic, "sum_over_time": classic,
	"count_over_time": classic, "quantile_over_time": classic, "stddev_over_time": classic,
	"stdvar_over_time": classic,
	"sum":              classic, "min": classic, "max": classic, "avg": classic, "stddev": classic, "stdvar": classic,
	"count": classic, "count_values": classic, "bottomk": classic, "topk": classic, "quantile": classic,
	"absent_over_time":   fn(version{2, 16}, "2.16.0: PromQL: add absent_over_time (#6490)"),
	"group":              fn(version{2, 20}, "2.20.0: PromQL: added group() aggregator (#7480)"),
	"last_over_time":     fn(version{2, 26}, "2.26.0: PromQL: add last_over_time, sgn, clamp (#8457)"),
	"sgn":                fn(version{2, 26}, "2.26.0: PromQL: add last_over_time, sgn, clamp (#8457)"),
	"clamp":              fn(version{2, 26}, "2.26.0: PromQL: add last_over_time, sgn, clamp (#8457)"),
	"present_over_time":  fn(version{2, 29}, "2.29.0: add present_over_time (#9097)"),
	"histogram_count":    fn(version{2, 40}, "2.40.0: experimental native histograms (#11447)"),
	"histogram_sum":      fn(version{2, 40}, "2.40.0: experimental native histograms (#11447)"),
	"histogram_fraction": fn(version{2, 40}, "2.40.0: experimental native histograms (#11447)"),
	"histogram_stddev":   fn(version{2, 47}, "2.47.0: add histogram_stdvar and histogram_stddev (#12614)"),
	"histogram_stdvar":   fn(version{2, 47}, "2.47.0: add histogram_stdvar and histogram_stddev (#12614)"),
	"histogram_avg":      fn(version{2, 51}, "2.51.0: add histogram_avg (#13467)"),
	"mad_over_time":      experimental(version{2, 49}, "2.49.0: experimental mad_over_time (#13059)"),
	"sort_by_label":      experimental(version{2, 49}, "2.49.0: experimental sort_by_label (#11299)"),
	"sort_by_label_desc": experimental(version{2, 49}, "2.49.0: experimental sort_by_label_desc (#11299)"),
	"limitk":             experimental(version{2, 54}, "2.54.0: limitk() and limit_ratio() (#12503)"),
	"limit_ratio":        experimental(version{2, 54}, "2.54.0: limitk() and limit_ratio() (#12503)"),
	"info":               experimental(version{2, 55}, "2.55.0: experimental info function (#14495)"),
	"double_exponential_smoothing": experimental(version{3, 0},
		"3.0.0: holt_winters is now called double_exponential_smoothing (#14930)"),
	"ts_of_max_over_time":   experimental(version{3, 5}, "3.5.0: ts_of_(min|max|last)_over_time (#16722)"),
	"ts_of_min_over_time":   experimental(version{3, 5}, "3.5.0: ts_of_(min|max|last)_over_time (#16722)"),
	"ts_of_last_over_time":  experimental(version{3, 5}, "3.5.0: ts_of_(min|max|last)_over_time (#16722)"),
	"first_over_time":       experimental(version{3, 7}, "3.7.0: first_over_time (#16963)"),
	"ts_of_first_over_time": experimental(version{3, 7}, "3.7.0: ts_of_first_over_time (#17021)"),
	"start":                 fn(version{2, 33}, "2.33.0: negative offset and @ modifier promoted to stable (#10121)"),
	"end":                   fn(version{2, 33}, "2.33.0: negative offset and @ modifier promoted to stable (#10121)"),
	"fill":                  fillModifier,
	"fill_left":             fillModifier,
	"fill_right":            fillModifier,
}

// promqlKeywords are the words of PromQL that a parenthesis may follow and
// that are not calls: grouping and matching modifiers, set operators.
var promqlKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "atan2": true,
	"inf": true, "Inf": true, "nan": true, "NaN": true,
}

// syntaxNeeds are constructs found by their shape in an expression.
var syntaxNeeds = []struct {
	re   *regexp.Regexp
	need need
}{
	{regexp.MustCompile(`@\s*([0-9]|start\s*\(|end\s*\()`),
		need{what: "@", since: version{2, 33}, source: "2.33.0: negative offset and @ modifier promoted to stable (#10121)"}},
	{regexp.MustCompile(`\boffset\s+-`),
		need{what: "negative offset", since: version{2, 33}, source: "2.33.0: negative offset and @ modifier promoted to stable (#10121)"}},
	{regexp.MustCompile(`\{\s*"`),
		need{what: "quoted metric name", since: version{3, 0}, source: "3.0.0: UTF-8 support enabled by default (#14705)"}},
}

// groupFields and ruleFields are the keys of a rule group and of a rule.
var groupFields = map[string]need{
	"name": classic, "rules": classic, "interval": classic,
	"limit":        fn(version{2, 31}, "2.31.0: rules: limit the number of alerts or series (#9260)"),
	"query_offset": fn(version{2, 53}, "2.53.0: rules: query_offset per rule group (#14061)"),
}

var ruleFields = map[string]need{
	"record": classic, "alert": classic, "expr": classic, "for": classic, "labels": classic, "annotations": classic,
	"keep_firing_for": fn(version{2, 42}, "2.42.0: add keep_firing_for to alerting rules (#11827)"),
}

// templateFuncs are the functions of alert templates (annotations, labels).
var templateFuncs = map[string]need{
	"humanize": classic, "humanize1024": classic, "humanizeDuration": classic, "humanizeTimestamp": classic,
	"title": classic, "toUpper": classic, "toLower": classic, "match": classic, "reReplaceAll": classic,
	"query": classic, "first": classic, "label": classic, "value": classic, "sortByLabel": classic,
	"safeHtml": classic, "externalURL": classic, "pathPrefix": classic, "graphLink": classic,
	"tableLink": classic, "args": classic, "tmpl": classic, "strvalue": classic,
	"humanizePercentage": fn(version{2, 11}, "2.11.0: humanizePercentage template function (#5670)"),
	"parseDuration":      fn(version{2, 32}, "2.32.0: parseDuration template function (#8817)"),
	"stripPort":          fn(version{2, 33}, "2.33.0: stripPort template function (#10002)"),
	"stripDomain":        fn(version{2, 36}, "2.36.0: stripDomain template function (#10475)"),
	"toTime":             fn(version{2, 38}, "2.38.0: toTime template function (#10993)"),
	"toDuration":         fn(version{3, 6}, "3.6.0: toDuration() and now() template functions (#16619)"),
	"now":                fn(version{3, 6}, "3.6.0: toDuration() and now() template functions (#16619)"),
	"urlQueryEscape":     fn(version{3, 8}, "3.8.0: urlQueryEscape template function (#17403)"),
}

// Go's own template words, and the builtins Prometheus templates may call.
var goTemplateWords = map[string]bool{
	"if": true, "else": true, "end": true, "range": true, "with": true, "and": true, "or": true,
	"not": true, "len": true, "index": true, "printf": true, "print": true, "println": true, "eq": true,
	"ne": true, "lt": true, "le": true, "gt": true, "ge": true, "define": true, "template": true,
	"block": true, "nil": true, "true": true, "false": true, "break": true, "continue": true,
	"slice": true, "html": true, "js": true, "urlquery": true, "call": true,
}

// Native histograms: gpuscope serves them as <FIELD>_distribution
// (docs/metrics.md), and a recording rule whose result is a histogram
// records one.
var (
	readsNativeHistograms = need{what: "reads native histograms", since: version{2, 40},
		flag:   "native-histograms",
		source: "2.40.0: experimental native histograms behind --enable-feature=native-histograms (#11447); 3.9 and later: scrape_native_histograms: true"}
	recordsNativeHistograms = need{what: "records native histograms", since: version{2, 47},
		source: "2.42.0 records native histograms (#11838), but until 2.47.0 the TSDB refuses a share of what rate() and sum() give " +
			"(\"observations found in buckets, but the Count field is ...\", prometheus/prometheus#12713, fixed by #12739)"}
)

// histogramToFloat are the calls that turn a native histogram into floats.
var histogramToFloat = map[string]bool{
	"histogram_quantile": true, "histogram_count": true, "histogram_sum": true, "histogram_fraction": true,
	"histogram_avg": true, "histogram_stddev": true, "histogram_stdvar": true,
}
