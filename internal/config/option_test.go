package config

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryFlagKeepsItsVariables: each flag listed in testdata/envvars.txt
// (every serve flag of gpuscope 1.x) still answers to the variables listed
// there, gpuscope's and dcgm-exporter's, in that order, so that no
// deployment's environment stops working when a flag is redefined. A
// renamed flag is found by its earlier spelling (Deprecated). A new flag
// gets its variable by EnvVar's rule and needs no line there.
func TestEveryFlagKeepsItsVariables(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "envvars.txt"))
	require.NoError(t, err)
	defer f.Close()
	got := map[string]string{}
	for _, o := range Options(&Input{}) {
		for _, name := range append([]string{o.Name}, o.Deprecated...) {
			got[name] = strings.Join(o.EnvVars(), " ")
		}
	}
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, vars, _ := strings.Cut(line, "\t")
		vs, ok := got[name]
		if assert.True(t, ok, "--%s is gone", name) {
			assert.Equal(t, vars, vs, "variables of --%s", name)
		}
		n++
	}
	require.NoError(t, sc.Err())
	assert.Equal(t, 72, n, "testdata/envvars.txt lists the 72 flags of gpuscope 1.x")
}

// TestFlagsShareOneStyle: gpuscope's own flag names are dashed, as most
// were; a dotted spelling is only an earlier name kept as Deprecated, and
// it answers to the same variable, so a deployment's environment needs no
// change. dcgm-exporter's names (Aliases) are not gpuscope's to restyle.
func TestFlagsShareOneStyle(t *testing.T) {
	deprecated := 0
	for _, o := range Options(&Input{}) {
		assert.NotContains(t, o.Name, ".", "--%s: gpuscope's flags are dashed; keep the dotted name as Deprecated", o.Name)
		for _, d := range o.Deprecated {
			deprecated++
			assert.Equal(t, EnvVar(o.Name), EnvVar(d), "--%s, the earlier --%s: one variable", o.Name, d)
			assert.NotContains(t, o.Aliases, d, "--%s is deprecated, not dcgm-exporter's", d)
		}
	}
	assert.Equal(t, 15, deprecated, "the dotted names of gpuscope 1.x")
}

// TestDeprecatedSpellingWarns: a flag given by its earlier spelling works
// and leaves one warning that names the spelling given and the new name;
// given by its name, no warning.
func TestDeprecatedSpellingWarns(t *testing.T) {
	for _, tt := range []struct {
		name, given string
		want        []Warning
	}{
		{"dotted", "--kubernetes.refresh-interval", []Warning{{Flag: "--kubernetes.refresh-interval",
			Message: "is deprecated: use --kubernetes-refresh-interval (the same flag; its variable is unchanged)"}}},
		{"dashed", "--kubernetes-refresh-interval", nil},
		{"variable", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Build(input(func(in *Input) {
				in.Given = map[string]string{FlagK8sRefresh: tt.given}
				in.PodAttr.RefreshInterval = 7 * time.Second
			}))
			require.NoError(t, err)
			assert.Equal(t, 7*time.Second, cfg.Kubernetes.PodAttr.RefreshInterval)
			assert.Equal(t, tt.want, cfg.Warnings)
		})
	}
}

// TestEnvVarFollowsTheName: the rule that names every flag's variable.
func TestEnvVarFollowsTheName(t *testing.T) {
	for name, want := range map[string]string{
		"collectors":                      "GPUSCOPE_COLLECTORS",
		"web.config.file":                 "GPUSCOPE_WEB_CONFIG_FILE",
		"kubernetes.pod-resources-socket": "GPUSCOPE_KUBERNETES_POD_RESOURCES_SOCKET",
		"dcgm.remote-hostengine":          "GPUSCOPE_DCGM_REMOTE_HOSTENGINE",
	} {
		assert.Equal(t, want, EnvVar(name), name)
	}
}

// readmeRow is one row of README.md's flag table.
type readmeRow struct {
	line          int
	names, vars   []string
	defaultColumn string
}

var (
	readmeName = regexp.MustCompile("--([a-z0-9.-]+)")
	readmeVar  = regexp.MustCompile("`([A-Z0-9_]+)`")
)

// readmeFlags reads the table under "## Flags" in README.md.
func readmeFlags(t *testing.T) []readmeRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	var rows []readmeRow
	in := false
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Flags"
		case in && strings.HasPrefix(line, "| `"):
			// The flag and default columns hold no '|'; the meaning may.
			cols := strings.Split(line, "|")
			require.GreaterOrEqual(t, len(cols), 4, "README.md:%d", i+1)
			flag, vars, _ := strings.Cut(cols[1], "[")
			r := readmeRow{line: i + 1, defaultColumn: strings.TrimSpace(cols[2])}
			for _, m := range readmeName.FindAllStringSubmatch(flag, -1) {
				r.names = append(r.names, m[1])
			}
			for _, m := range readmeVar.FindAllStringSubmatch(vars, -1) {
				r.vars = append(r.vars, m[1])
			}
			rows = append(rows, r)
		}
	}
	require.NotEmpty(t, rows, "README.md has no flag table under ## Flags")
	return rows
}

// TestREADMEFlagTableMatchesTheOptions: each flag of README.md's table is
// an option, with its variables and its default as the flag declares them.
func TestREADMEFlagTableMatchesTheOptions(t *testing.T) {
	byName := map[string]Option{}
	for _, o := range Options(&Input{}) {
		byName[o.Name] = o
	}
	for _, r := range readmeFlags(t) {
		if len(r.names) != 1 || strings.HasSuffix(r.names[0], "-") {
			continue // a row about a group of flags
		}
		o, ok := byName[r.names[0]]
		if !assert.True(t, ok, "README.md:%d: --%s is no flag", r.line, r.names[0]) {
			continue
		}
		if assert.NotEmpty(t, r.vars, "README.md:%d: --%s has no variable in brackets", r.line, o.Name) {
			assert.Equal(t, o.EnvVars()[:len(r.vars)], r.vars, "README.md:%d: variables of --%s", r.line, o.Name)
		}
		readmeDefault(t, r, o.Value.Default())
	}
}

// readmeDefault checks the table's default column against the option's
// default def: on or off for a switch; for a value, the same value in
// backticks (a duration may be written shorter, 5m for 5m0s). An option
// without a default may say in words what happens instead.
func readmeDefault(t *testing.T, r readmeRow, def any) {
	t.Helper()
	col := r.defaultColumn
	if b, ok := def.(bool); ok {
		want := map[bool]string{true: "on", false: "off"}[b]
		assert.Equal(t, want, col, "README.md:%d: default of --%s", r.line, r.names[0])
		return
	}
	v := fmt.Sprint(def)
	given, quoted := strings.CutPrefix(col, "`")
	given, _ = strings.CutSuffix(given, "`")
	quoted = quoted && !strings.Contains(given, "`")
	if v == "" || v == "0s" || v == "0" || v == "[]" {
		assert.False(t, quoted, "README.md:%d: --%s has no default, the table gives %s", r.line, r.names[0], col)
		return
	}
	if !assert.True(t, quoted, "README.md:%d: default of --%s is `%s`, the table says %q", r.line, r.names[0], v, col) {
		return
	}
	if d, err := time.ParseDuration(v); err == nil {
		g, err := time.ParseDuration(given)
		if assert.NoError(t, err, "README.md:%d", r.line) {
			assert.Equal(t, d, g, "README.md:%d: default of --%s", r.line, r.names[0])
		}
		return
	}
	assert.Equal(t, v, given, "README.md:%d: default of --%s", r.line, r.names[0])
}
