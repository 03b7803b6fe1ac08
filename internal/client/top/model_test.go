package top

import (
	"errors"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

func entity(gpu int, pod string, power, sm float64) sampleapi.Entity {
	labels := map[string]string{"modelName": "NVIDIA H100"}
	if pod != "" {
		labels["pod"], labels["namespace"] = pod, "ml"
	}
	return sampleapi.Entity{Key: "gpu/" + string(rune('a'+gpu)), Kind: "gpu", GPU: gpu, Labels: labels, Series: []sampleapi.Series{
		{Field: FieldPower, T: []int64{1, 2}, V: sampleapi.Values{power - 10, power}},
		{Field: FieldSM, T: []int64{1, 2}, V: sampleapi.Values{sm, sm}},
	}}
}

func newModel(t *testing.T, width int) *Model {
	t.Helper()
	clock := time.Unix(1_700_000_000, 0)
	m := New("node:9400", func() time.Time { return clock })
	m.Update(tea.WindowSizeMsg{Width: width, Height: 20})
	m.Update(ServedMsg{Served: []string{FieldPower, FieldSM}})
	m.Update(DataMsg{Result: &sampleapi.Result{Hostname: "node-1", Fields: []sampleapi.Field{{Name: FieldSM, IntervalNS: 1e8}},
		Entities: []sampleapi.Entity{entity(0, "train", 300, 0.9), entity(1, "", 500, 0.1), entity(2, "train", 400, 0.5)}}})
	return m
}

func tableRows(view string) []string {
	var out []string
	for _, l := range strings.Split(view, "\n") {
		if len(l) > 0 && l[0] >= '0' && l[0] <= '9' {
			out = append(out, l)
		}
	}
	return out
}

func TestViewShowsRowsAndNA(t *testing.T) {
	m := newModel(t, 160)
	v := m.View()
	assert.Contains(t, v, "node node-1")
	assert.Contains(t, v, "3 GPUs")
	rows := tableRows(v)
	require.Len(t, rows, 3)
	assert.True(t, strings.HasPrefix(rows[0], "0    ml/train"), rows[0])
	assert.Contains(t, rows[0], "90%")
	assert.Contains(t, rows[0], "300 W")
	assert.Contains(t, rows[0], NA, "tensor is not served")
	assert.Contains(t, v, "q quit", "the help line")
	assert.Equal(t, 20, strings.Count(v, "\n")+1, "the view fills the terminal")
}

func TestSortKeys(t *testing.T) {
	tests := []struct {
		keys []string
		want []string
	}{
		{nil, []string{"0", "1", "2"}},
		{[]string{"p"}, []string{"1", "2", "0"}},
		{[]string{"p", "r"}, []string{"0", "2", "1"}},
		{[]string{"s"}, []string{"0", "2", "1"}},
		{[]string{"s", "g"}, []string{"0", "1", "2"}},
		{[]string{"g", "r"}, []string{"2", "1", "0"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.keys, ","), func(t *testing.T) {
			m := newModel(t, 160)
			for _, k := range tt.keys {
				m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)})
			}
			var got []string
			for _, r := range tableRows(m.View()) {
				got = append(got, strings.Fields(r)[0])
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// A narrow terminal drops columns, never wraps a row.
func TestNarrowTerminalDropsColumns(t *testing.T) {
	tests := []struct {
		width         int
		has, hasNot   []string
		sparkExpected bool
	}{
		{160, []string{"POD", "TEMP", "NVLINK TX"}, nil, true},
		{90, []string{"POD", "POWER", "TEMP"}, []string{"NVLINK TX"}, true},
		{60, []string{"SM", "POWER"}, []string{"TEMP", "NVLINK TX", "MEMORY"}, false},
		{30, []string{"GPU", "SM"}, []string{"POD", "POWER"}, false},
	}
	for _, tt := range tests {
		m := newModel(t, tt.width)
		v := m.View()
		for _, l := range strings.Split(v, "\n") {
			assert.LessOrEqual(t, len([]rune(l)), tt.width, "width %d: %q", tt.width, l)
		}
		header := strings.Split(v, "\n")[1]
		for _, h := range tt.has {
			assert.Contains(t, header, h, "width %d", tt.width)
		}
		for _, h := range tt.hasNot {
			assert.NotContains(t, header, h, "width %d", tt.width)
		}
		assert.Equal(t, tt.sparkExpected, strings.Contains(header, "last"), "width %d: %s", tt.width, header)
	}
}

func TestBannerWhenTheExporterGoesAway(t *testing.T) {
	m := newModel(t, 160)
	m.Update(DownMsg{Err: errors.New("connection refused"), Retry: time.Second})
	v := m.View()
	assert.Contains(t, v, "node:9400 unreachable")
	assert.Contains(t, v, "connection refused")
	assert.Len(t, tableRows(v), 3, "the last values stay")
	m.Update(DataMsg{Result: &sampleapi.Result{Entities: []sampleapi.Entity{entity(0, "train", 310, 0.9)}}})
	assert.NotContains(t, m.View(), "unreachable")
}

func TestDetailPane(t *testing.T) {
	m := newModel(t, 120)
	m.Update(tea.KeyMsg{Type: tea.KeyDown})
	m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	v := m.View()
	assert.Contains(t, v, "GPU 1 detail")
	assert.Contains(t, v, "SM active")
	assert.Contains(t, v, "tensor active   "+NA)
	m.Update(tea.KeyMsg{Type: tea.KeyEsc})
	assert.NotContains(t, m.View(), "GPU 1 detail")
}

func TestHistoryIsBounded(t *testing.T) {
	var h history
	for i := range 3 * HistoryCap {
		h.push(int64(i), float64(i))
	}
	last := h.last(HistoryCap + 10)
	require.Len(t, last, HistoryCap)
	assert.Equal(t, float64(3*HistoryCap-1), last[len(last)-1])
	assert.Equal(t, float64(2*HistoryCap), last[0])
}

func TestSparkAndGraphLevels(t *testing.T) {
	assert.Equal(t, " ▄█", spark([]float64{0, 0.5, 1}, 1, 3))
	assert.Equal(t, " ▄█  ", spark([]float64{0, 0.5, 1}, 1, 5), "padded to the width")
	g := graph([]float64{0, 0.5, 1}, 1, 3, 2)
	assert.Equal(t, []string{"  █", " ██"}, g)
}

func TestBannerSaysWhyTheServerRefuses(t *testing.T) {
	m := newModel(t, 200)
	m.Update(DownMsg{Err: &sampleapi.StatusError{Code: 401, URL: "http://node:9400/api/v1/samples", Msg: "Unauthorized"}, Retry: time.Second})
	v := m.View()
	assert.Contains(t, v, "node:9400 answered 401 Unauthorized")
	assert.Contains(t, v, "give --username and --password")
	assert.NotContains(t, v, "unreachable")
}

func TestMIGInstancesGetRows(t *testing.T) {
	m := newModel(t, 160)
	mig := sampleapi.Entity{Key: "gi/a/3", Kind: "gpu_instance", GPU: 0,
		Labels: map[string]string{"GPU_I_ID": "3", "GPU_I_PROFILE": "1g.10gb", "pod": "infer", "namespace": "serve"},
		Series: []sampleapi.Series{{Field: FieldSM, T: []int64{5}, V: sampleapi.Values{0.25}}}}
	link := sampleapi.Entity{Key: "link/a/1", Kind: "nvlink", GPU: 0, Labels: map[string]string{}, Series: []sampleapi.Series{{Field: FieldSM, T: []int64{5}, V: sampleapi.Values{1}}}}
	m.Update(DataMsg{Result: &sampleapi.Result{Entities: []sampleapi.Entity{mig, link}}})
	rows := tableRows(m.View())
	require.Len(t, rows, 4, "the MIG instance gets a row, the link none")
	assert.True(t, strings.HasPrefix(rows[1], "0/3 1g.10gb"), rows[1])
	assert.Contains(t, rows[1], "serve/infer")
	assert.Contains(t, rows[1], "25%")
	assert.Contains(t, m.View(), "3 GPUs", "MIG instances are not counted as GPUs")
}
