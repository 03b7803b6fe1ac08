// Package fieldspage drives the /fields page of the real gpuscope binary in
// a headless Chromium (Debian's chromium package, through chromedp): it
// ticks fields, reads the cost the page's script computes, downloads the
// counters CSV and checks it with `gpuscope counters check`.
package fieldspage

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source/sim"
)

// gpus is the simulated node's size; a GPU-level gauge adds one series per GPU.
const gpus = 4

const runningCSV = `DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C)., 1s, max avg
DCGM_FI_PROF_SM_ACTIVE, gauge, The ratio of cycles an SM has at least 1 warp assigned., 100ms
`

func startNode(t *testing.T, args ...string) string {
	t.Helper()
	csv := filepath.Join(t.TempDir(), "counters.csv")
	require.NoError(t, os.WriteFile(csv, []byte(runningCSV), 0o600))
	base, _ := e2etest.GPUScope(t, append([]string{"--source=sim", "--sim-gpus=" + strconv.Itoa(gpus), "--sim-event-rate=0", "--collectors=" + csv}, args...)...)
	return base
}

// browserTimeout bounds a browser session. It only turns a hung Chromium
// into a failure, so it is generous: on a loaded machine Chromium runs many
// times slower than on an idle one (a session of 9 s took over 90 s at a
// load of fifteen runnable processes per core).
const browserTimeout = 5 * time.Minute

// newBrowser starts a headless Chromium; as root it needs --no-sandbox. Its
// context ends after browserTimeout, or shortly before the test's own
// deadline, so that a hung browser fails the test with a message.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := e2etest.RequireTool(t, "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	deadline := time.Now().Add(browserTimeout)
	if d, ok := t.Deadline(); ok && d.Add(-10*time.Second).Before(deadline) {
		deadline = d.Add(-10 * time.Second)
	}
	ctx, cancelTimeout := context.WithDeadline(ctx, deadline)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAlloc() })
	return ctx
}

// waitInBrowser checks cond until it holds or the browser session ends, and
// reports whether it held.
func waitInBrowser(ctx context.Context, cond func() bool) bool {
	deadline, _ := ctx.Deadline()
	return testwait.Until(time.Until(deadline), cond)
}

// shownCost is what the page's cost panel says.
type shownCost struct{ series, bytes, sps string }

func readCost(t *testing.T, ctx context.Context) shownCost {
	t.Helper()
	var c shownCost
	var err error
	c.series, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#cost-series")))
	require.NoError(t, err)
	bytes, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#cost-bytes"), "data-bytes"))
	require.NoError(t, err)
	c.bytes = bytes.Value
	c.sps, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#cost-sps")))
	require.NoError(t, err)
	return c
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	require.NoError(t, err, "%q", s)
	return n
}

func TestPickFieldsInABrowser(t *testing.T) {
	base := startNode(t) // builds the binary first: not on the browser's time
	ctx := newBrowser(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/fields"), chromedp.WaitVisible(chromedp.CSS("#cost-series"))))

	ticked, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("input.pick:checked")).map(e => e.value)`))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_PROF_SM_ACTIVE"}, ticked, "the running file's fields start ticked")
	before := readCost(t, ctx)

	boxes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("input.pick")).map(e => e.value)`))
	require.NoError(t, err)
	var served []string
	for _, info := range counters.All() {
		if ok, _ := sim.Support().Serves(info.ID); ok && !info.Legacy && info.Described() {
			served = append(served, info.Name)
		}
	}
	assert.ElementsMatch(t, served, boxes, "a checkbox for every field the sim serves")

	// A GPU-level gauge adds a series per GPU; two window statistics add
	// the samples family and a series per statistic on every GPU.
	steps := []struct {
		what   string
		click  string
		series int
	}{
		{"tick power", `input.pick[value="DCGM_FI_DEV_POWER_USAGE"]`, gpus},
		{"tick its max", `input.stat[name="stats.DCGM_FI_DEV_POWER_USAGE"][value="max"]`, 2 * gpus},
		{"tick its p99", `input.stat[name="stats.DCGM_FI_DEV_POWER_USAGE"][value="p99"]`, gpus},
		{"tick framebuffer used", `input.pick[value="DCGM_FI_DEV_FB_USED"]`, gpus},
		{"untick SM activity", `input.pick[value="DCGM_FI_PROF_SM_ACTIVE"]`, -gpus},
	}
	prev := before
	for _, s := range steps {
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(s.click))), s.what)
		now := readCost(t, ctx)
		assert.Equal(t, atoi(t, prev.series)+s.series, atoi(t, now.series), "%s: series", s.what)
		assert.Greater(t, abs(atoi(t, now.bytes)-atoi(t, prev.bytes)), 0, "%s: bytes per scrape move", s.what)
		prev = now
	}
	wantSPS := strconv.FormatFloat(float64(atoi(t, prev.series))/15, 'f', 1, 64)
	assert.Equal(t, wantSPS, prev.sps, "samples per second at a 15 s scrape")

	// The script's numbers are the server's: the same form submitted
	// without the script shows the same cost.
	query, err := chromedp.Run(ctx, chromedp.Evaluate[string](`new URLSearchParams(new FormData(document.getElementById("fields"))).toString()`))
	require.NoError(t, err)
	// Series are exact; bytes follow the values' lengths in the live
	// exposition, which move by a few bytes between two loads.
	page := httpGet(t, base+"/fields?"+query, http.StatusOK)
	assert.Equal(t, prev.series, between(t, page, `id="cost-series">`, "<"), "series without the script")
	assert.Equal(t, prev.sps, between(t, page, `id="cost-sps">`, "<"), "samples/s without the script")
	assert.InEpsilon(t, atoi(t, prev.bytes), atoi(t, between(t, page, `data-bytes="`, `"`)), 0.01, "bytes without the script")

	csv := download(t, ctx)
	assert.Equal(t, []string{
		"DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C)., 1s, max avg",
		"DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W)., , max p99",
		"DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).",
	}, fieldLines(csv))
	counterCheck(t, csv, 3)

	// The script refreshes the previews from /fields.csv.
	var preview string
	require.True(t, waitInBrowser(ctx, func() bool {
		preview, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#out-csv")))
		return err == nil && strings.Contains(preview, "DCGM_FI_DEV_FB_USED")
	}), "the CSV preview never showed the ticked field: %q", preview)
	assert.Equal(t, fieldLines(csv), fieldLines(preview))
}

// between is the text of s after the first from, up to the next to.
func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, from)
	require.True(t, ok, "no %q in the page", from)
	v, _, _ := strings.Cut(rest, to)
	return v
}

func abs(n int) int { return max(n, -n) }

// download clicks the CSV button and returns the file the browser saved.
func download(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
				Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir})
			return err
		}),
		chromedp.Click(chromedp.CSS("#download-csv"))))
	file := filepath.Join(dir, "counters.csv")
	var body []byte
	require.True(t, waitInBrowser(ctx, func() bool {
		b, err := os.ReadFile(file)
		body = b
		return err == nil && len(b) > 0
	}), "no counters.csv downloaded into %s", dir)
	return string(body)
}

func fieldLines(csv string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(csv), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// TestCSVOfTwoFields: /fields.csv with two fields returns a counters file
// of exactly those two that `gpuscope counters check` accepts.
func TestCSVOfTwoFields(t *testing.T) {
	base := startNode(t)
	csv := httpGet(t, base+"/fields.csv?field=DCGM_FI_DEV_FB_USED&field=DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"+
		"&interval.DCGM_FI_PROF_PIPE_TENSOR_ACTIVE=100ms&stats.DCGM_FI_PROF_PIPE_TENSOR_ACTIVE=max+p99", http.StatusOK)
	assert.Equal(t, []string{
		"DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).",
		"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active., 100ms, max p99",
	}, fieldLines(csv))
	counterCheck(t, csv, 2)
	bad := httpGet(t, base+"/fields.csv?field=DCGM_FI_DEV_FB_USED,DCGM_FI_DEV_FB_USD", http.StatusBadRequest)
	assert.Contains(t, bad, `"DCGM_FI_DEV_FB_USD"`)
}

// counterCheck runs `gpuscope counters check` on the downloaded file.
func counterCheck(t *testing.T, csv string, fields int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "counters.csv")
	require.NoError(t, os.WriteFile(file, []byte(csv), 0o600))
	out, err := exec.Command(e2etest.Binary(t), "counters", "check", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "ok ("+strconv.Itoa(fields)+" fields)")
}

func httpGet(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, want, resp.StatusCode, "%s: %s", url, b)
	return string(b)
}

// TestFieldsNeedTheWebConfigPassword: /fields and /fields.csv sit behind
// the web config's basic auth like /metrics.
func TestFieldsNeedTheWebConfigPassword(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "web.yml")
	// bcrypt of "s3cret" at cost 4.
	require.NoError(t, os.WriteFile(cfg, []byte("basic_auth_users:\n  prom: $2a$04$jcD672bfJ/EIqmVDvRIBvu8auDJS4b2fjhsI1lo83EczAtbvJJ7HO\n"), 0o600))
	csv := filepath.Join(t.TempDir(), "counters.csv")
	require.NoError(t, os.WriteFile(csv, []byte(runningCSV), 0o600))
	addr := e2etest.FreePort(t)
	e2etest.Start(t, e2etest.Binary(t), "--address", addr, "--source=sim", "--sim-gpus=1", "--collectors="+csv, "--web-config-file="+cfg)
	base := "http://" + addr
	for _, path := range []string{"/metrics", "/fields", "/fields.csv?field=DCGM_FI_DEV_GPU_TEMP"} {
		var code int
		require.True(t, testwait.Until(30*time.Second, func() bool {
			resp, err := http.Get(base + path)
			if err != nil {
				return false
			}
			resp.Body.Close()
			code = resp.StatusCode
			return true
		}), "%s never answered", path)
		assert.Equal(t, http.StatusUnauthorized, code, path)
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth("prom", "s3cret")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
}
