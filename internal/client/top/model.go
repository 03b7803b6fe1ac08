// Package top is `gpuscope top`: a terminal view of one node, fed by a
// running gpuscope's raw-sample stream, with one row per GPU or MIG
// instance, sort keys, and a detail pane with larger graphs of one GPU.
package top

import (
	"math"
	"sort"
	"strconv"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// Field names the view reads.
const (
	FieldSM       = "DCGM_FI_PROF_SM_ACTIVE"
	FieldTensor   = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
	FieldDRAM     = "DCGM_FI_PROF_DRAM_ACTIVE"
	FieldNVLinkTX = "DCGM_FI_PROF_NVLINK_TX_BYTES"
	FieldNVLinkRX = "DCGM_FI_PROF_NVLINK_RX_BYTES"
	FieldPower    = "DCGM_FI_DEV_POWER_USAGE"
	FieldTemp     = "DCGM_FI_DEV_GPU_TEMP"
	FieldFBUsed   = "DCGM_FI_DEV_FB_USED"
	FieldFBTotal  = "DCGM_FI_DEV_FB_TOTAL"
)

// Fields are the fields the view asks the server for.
var Fields = []string{FieldSM, FieldTensor, FieldDRAM, FieldNVLinkTX, FieldNVLinkRX, FieldPower, FieldTemp, FieldFBUsed, FieldFBTotal}

// HistoryCap bounds the samples kept per field and row: a 60 s window at
// 100 ms.
const HistoryCap = 600

// MaxRows bounds the rows kept: a node with more entities than this shows
// the first ones.
const MaxRows = 512

// history is a bounded ring of the newest samples of one field.
type history struct {
	t    []int64
	v    []float64
	head int
	n    int
}

func (h *history) push(ts int64, v float64) {
	if h.t == nil {
		h.t, h.v = make([]int64, HistoryCap), make([]float64, HistoryCap)
	}
	h.t[h.head], h.v[h.head] = ts, v
	h.head = (h.head + 1) % HistoryCap
	if h.n < HistoryCap {
		h.n++
	}
}

// last returns up to n newest values, oldest first.
func (h *history) last(n int) []float64 {
	if n > h.n {
		n = h.n
	}
	out := make([]float64, n)
	for i := 0; i < n; i++ {
		out[i] = h.v[(h.head-n+i+2*HistoryCap)%HistoryCap]
	}
	return out
}

// Row is one GPU or MIG instance.
type Row struct {
	Key   string
	Kind  string
	GPU   int
	Name  string // "0", or "0/3 1g.10gb" for a MIG instance
	Pod   string // "namespace/pod", empty when unallocated
	Model string
	val   map[string]float64
	ts    map[string]int64
	hist  map[string]*history
}

// Value returns the newest value of a field, and false when there is none.
func (r *Row) Value(field string) (float64, bool) {
	v, ok := r.val[field]
	return v, ok && !math.IsNaN(v)
}

// Sort keys.
const (
	SortGPU    = "gpu"
	SortSM     = "sm"
	SortTensor = "tensor"
	SortDRAM   = "dram"
	SortPower  = "power"
	SortMemory = "memory"
)

var sortFields = map[string]string{SortSM: FieldSM, SortTensor: FieldTensor, SortDRAM: FieldDRAM, SortPower: FieldPower, SortMemory: FieldFBUsed}

// Messages from the feed.
type (
	// ServedMsg says which fields the server serves.
	ServedMsg struct {
		Served  []string
		Refused map[string]string
	}
	// DataMsg carries samples.
	DataMsg struct{ Result *sampleapi.Result }
	// DownMsg says the server cannot be reached or ended the stream.
	DownMsg struct {
		Err   error
		Retry time.Duration
	}
	// tickMsg redraws the clock and the banner's age.
	tickMsg time.Time
)

// Model is the view's state.
type Model struct {
	Address  string
	Hostname string
	rows     []*Row
	byKey    map[string]*Row
	served   map[string]bool
	known    bool // served is known
	up       bool
	downErr  error
	downAt   time.Time
	retry    time.Duration
	sortKey  string
	reverse  bool
	cursor   int
	detail   bool
	width    int
	height   int
	now      func() time.Time
	interval time.Duration
}

// New returns the model of a view of the gpuscope at address.
func New(address string, now func() time.Time) *Model {
	if now == nil {
		now = time.Now
	}
	return &Model{Address: address, byKey: map[string]*Row{}, served: map[string]bool{}, sortKey: SortGPU,
		width: 120, height: 40, now: now}
}

// Init starts the clock.
func (m *Model) Init() tea.Cmd { return tick() }

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// Update applies a message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.KeyMsg:
		return m, m.key(msg.String())
	case ServedMsg:
		// A server that came back may serve other fields at other rates.
		m.served, m.interval = map[string]bool{}, 0
		for _, f := range msg.Served {
			m.served[f] = true
		}
		m.known = true
	case DataMsg:
		m.up, m.downErr = true, nil
		m.add(msg.Result)
	case DownMsg:
		if m.up || m.downErr == nil {
			m.downAt = m.now()
		}
		m.up, m.downErr, m.retry = false, msg.Err, msg.Retry
	case tickMsg:
		return m, tick()
	}
	return m, nil
}

func (m *Model) key(k string) tea.Cmd {
	switch k {
	case "q", "ctrl+c":
		return tea.Quit
	case "up", "k":
		if m.cursor > 0 {
			m.cursor--
		}
	case "down", "j":
		if m.cursor < len(m.rows)-1 {
			m.cursor++
		}
	case "enter":
		m.detail = !m.detail
	case "esc":
		m.detail = false
	case "g":
		m.setSort(SortGPU)
	case "s":
		m.setSort(SortSM)
	case "t":
		m.setSort(SortTensor)
	case "d":
		m.setSort(SortDRAM)
	case "p":
		m.setSort(SortPower)
	case "m":
		m.setSort(SortMemory)
	case "r":
		m.reverse = !m.reverse
	}
	return nil
}

func (m *Model) setSort(k string) {
	if m.sortKey == k {
		return
	}
	m.sortKey, m.reverse = k, false
}

// add merges samples into the rows.
func (m *Model) add(r *sampleapi.Result) {
	if r.Hostname != "" {
		m.Hostname = r.Hostname
	}
	for _, f := range r.Fields {
		if f.IntervalNS > 0 && (m.interval == 0 || time.Duration(f.IntervalNS) < m.interval) {
			m.interval = time.Duration(f.IntervalNS)
		}
	}
	for _, e := range r.Entities {
		if e.Kind != "gpu" && e.Kind != "gpu_instance" {
			continue
		}
		row := m.byKey[e.Key]
		if row == nil {
			if len(m.rows) >= MaxRows {
				continue
			}
			row = &Row{Key: e.Key, Kind: e.Kind, GPU: e.GPU, val: map[string]float64{}, ts: map[string]int64{}, hist: map[string]*history{}}
			m.byKey[e.Key] = row
			m.rows = append(m.rows, row)
		}
		row.Name = strconv.Itoa(e.GPU)
		if e.Kind == "gpu_instance" {
			row.Name += "/" + e.Labels["GPU_I_ID"] + " " + e.Labels["GPU_I_PROFILE"]
		}
		row.Pod = ""
		if p := e.Labels["pod"]; p != "" {
			row.Pod = e.Labels["namespace"] + "/" + p
		}
		row.Model = e.Labels["modelName"]
		for _, s := range e.Series {
			h := row.hist[s.Field]
			if h == nil {
				h = &history{}
				row.hist[s.Field] = h
			}
			for i, ts := range s.T {
				if ts <= row.ts[s.Field] {
					continue
				}
				row.ts[s.Field], row.val[s.Field] = ts, s.V[i]
				h.push(ts, s.V[i])
			}
		}
	}
}

// sorted returns the rows in the view's order.
func (m *Model) sorted() []*Row {
	out := append([]*Row(nil), m.rows...)
	byIdentity := func(i, j int) bool {
		if out[i].GPU != out[j].GPU {
			return out[i].GPU < out[j].GPU
		}
		if out[i].Kind != out[j].Kind {
			return out[i].Kind == "gpu"
		}
		return out[i].Key < out[j].Key
	}
	field, ok := sortFields[m.sortKey]
	sort.SliceStable(out, func(i, j int) bool {
		if !ok {
			if m.reverse {
				return byIdentity(j, i)
			}
			return byIdentity(i, j)
		}
		a, aok := out[i].Value(field)
		b, bok := out[j].Value(field)
		switch {
		case aok != bok:
			return aok // rows without the value last
		case !aok || a == b:
			return byIdentity(i, j)
		case m.reverse:
			return a < b
		}
		return a > b
	})
	return out
}
