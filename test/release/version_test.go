package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// chartField reads a top-level "key: value" of a Chart.yaml, quotes removed.
func chartField(t *testing.T, chart, key string) string {
	t.Helper()
	b, err := os.ReadFile(chart)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + key + `:\s*"?([^"\s]+)"?\s*$`).FindStringSubmatch(string(b))
	require.NotNil(t, m, "%s has no %s", chart, key)
	return m[1]
}

// TestChartAndChangelogFollowTheRelease: the chart's version and appVersion
// (which is the image tag it pulls), CHANGELOG.md's newest section and, at a
// release tag, the tag all name one version.
func TestChartAndChangelogFollowTheRelease(t *testing.T) {
	root := e2etest.RepoRoot()
	chart := filepath.Join(root, "deploy", "helm", "gpuscope", "Chart.yaml")
	version := chartField(t, chart, "version")
	assert.Regexp(t, `^\d+\.\d+\.\d+(-(alpha|beta|rc)\.\d+)?$`, version, "the chart's version is a release version")
	assert.Equal(t, version, chartField(t, chart, "appVersion"), "appVersion follows the release")

	values, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "gpuscope", "values.yaml"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^image:\n(\s+.*\n)*?\s+tag: ""`, string(values),
		"image.tag stays empty, so the chart pulls the image tagged with its appVersion")

	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^## \[([^\]]+)\]`).FindAllStringSubmatch(string(changelog), -1)
	require.NotEmpty(t, m, "CHANGELOG.md has a section per version, '## [X.Y.Z] - date'")
	newest := m[0][1]
	if newest == "Unreleased" {
		require.Greater(t, len(m), 1, "CHANGELOG.md has a released version below Unreleased")
		newest = m[1][1]
	}
	assert.Equal(t, version, newest, "the chart's version is CHANGELOG.md's newest release")

	cmd := exec.Command("git", "describe", "--tags", "--exact-match", "--match", "v[0-9]*.[0-9]*.[0-9]*", "HEAD")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		assert.Equal(t, "v"+version, strings.TrimSpace(string(out)), "the release tag at HEAD is the chart's version")
	}
}

func TestSetVersion(t *testing.T) {
	root := e2etest.RepoRoot()
	orig, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "gpuscope", "Chart.yaml"))
	require.NoError(t, err)
	tests := []struct {
		arg, want, wantErr string
	}{
		{arg: "0.7.2", want: "0.7.2"},
		{arg: "v1.0.0", want: "1.0.0"},
		{arg: "1.1.0-rc.1", want: "1.1.0-rc.1"},
		{arg: "1.2", wantErr: "'1.2' is not a release version"},
		{arg: "1.2.3-3-gabcdef0", wantErr: "is not a release version"},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			chart := filepath.Join(t.TempDir(), "Chart.yaml")
			require.NoError(t, os.WriteFile(chart, orig, 0o644))
			cmd := exec.Command(filepath.Join(root, "scripts", "set-version.sh"), tt.arg)
			cmd.Env = append(os.Environ(), "CHART_YAML="+chart)
			out, err := cmd.CombinedOutput()
			if tt.wantErr != "" {
				assert.Error(t, err)
				assert.Contains(t, string(out), tt.wantErr)
				b, _ := os.ReadFile(chart)
				assert.Equal(t, string(orig), string(b), "a refused version leaves the chart alone")
				return
			}
			require.NoError(t, err, "%s", out)
			assert.Equal(t, tt.want, chartField(t, chart, "version"))
			assert.Equal(t, tt.want, chartField(t, chart, "appVersion"))
			assert.Contains(t, mustRead(t, chart), `appVersion: "`+tt.want+`"`, "appVersion stays a quoted string")
		})
	}
}

// TestReleaseRefusesWhatDoesNotAgree: make release stops before building
// when the version is not semantic, or when a release version is not the
// chart's.
func TestReleaseRefusesWhatDoesNotAgree(t *testing.T) {
	root := e2etest.RepoRoot()
	tests := []struct {
		version, want string
	}{
		{"v1.0.0", "is not a semantic version"},
		{"1.2", "is not a semantic version"},
		{"99.0.0", "Chart.yaml has version: "},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			dist := t.TempDir()
			cmd := exec.Command("make", "--no-print-directory", "release", "DIST="+dist, "VERSION="+tt.version)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			assert.Error(t, err)
			assert.Contains(t, string(out), tt.want)
			entries, _ := os.ReadDir(dist)
			assert.Empty(t, entries, "nothing is written")
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestChartRunsTheReleaseImageOnEveryArchitecture renders the chart with its
// defaults: the DaemonSet pulls the image tagged with the chart's
// appVersion (a manifest list of amd64 and arm64), and nothing pins it to
// one architecture's nodes.
func TestChartRunsTheReleaseImageOnEveryArchitecture(t *testing.T) {
	helm := e2etest.RequireTool(t, "helm")
	root := e2etest.RepoRoot()
	chart := filepath.Join(root, "deploy", "helm", "gpuscope")
	out, err := exec.Command(helm, "template", "gpuscope", chart).CombinedOutput()
	require.NoError(t, err, "helm template: %s", out)
	version := chartField(t, filepath.Join(chart, "Chart.yaml"), "appVersion")
	assert.Contains(t, string(out), `image: "ghcr.io/gpuscope/gpuscope:`+version+`"`)
	for _, pin := range []string{"kubernetes.io/arch", "amd64", "arm64", "x86_64"} {
		assert.NotContains(t, string(out), pin, "the rendered chart names no architecture")
	}
}
