package top

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

var (
	styleTitle  = lipgloss.NewStyle().Bold(true)
	styleHeader = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12"))
	styleCursor = lipgloss.NewStyle().Reverse(true)
	styleBanner = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("15")).Background(lipgloss.Color("1"))
	styleDim    = lipgloss.NewStyle().Foreground(lipgloss.Color("8"))
	styleSpark  = lipgloss.NewStyle().Foreground(lipgloss.Color("10"))
)

// column is one column of the table. Columns with a higher drop number
// leave first when the terminal is too narrow, so a row never wraps.
type column struct {
	title string
	width int
	drop  int
	sort  string
	cell  func(m *Model, r *Row) string
}

// NA is what a field the node does not serve shows.
const NA = "n/a"

func (m *Model) fieldCell(r *Row, field string, format func(float64) string) string {
	if m.known && !m.served[field] {
		return NA
	}
	v, ok := r.Value(field)
	if !ok {
		return "-"
	}
	return format(v)
}

func percent(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }

// rate formats bytes per second with a decimal prefix.
func rate(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.1f GB/s", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1f MB/s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f kB/s", v/1e3)
	}
	return fmt.Sprintf("%.0f B/s", v)
}

var columns = []column{
	{title: "GPU", width: 4, drop: 0, sort: SortGPU, cell: func(_ *Model, r *Row) string { return r.Name }},
	{title: "POD", width: 26, drop: 3, cell: func(_ *Model, r *Row) string {
		if r.Pod == "" {
			return "-"
		}
		return r.Pod
	}},
	{title: "SM", width: 5, drop: 0, sort: SortSM, cell: func(m *Model, r *Row) string { return m.fieldCell(r, FieldSM, percent) }},
	{title: "TENSOR", width: 6, drop: 1, sort: SortTensor, cell: func(m *Model, r *Row) string { return m.fieldCell(r, FieldTensor, percent) }},
	{title: "DRAM", width: 5, drop: 1, sort: SortDRAM, cell: func(m *Model, r *Row) string { return m.fieldCell(r, FieldDRAM, percent) }},
	{title: "POWER", width: 6, drop: 2, sort: SortPower, cell: func(m *Model, r *Row) string {
		return m.fieldCell(r, FieldPower, func(v float64) string { return fmt.Sprintf("%.0f W", v) })
	}},
	{title: "TEMP", width: 5, drop: 4, cell: func(m *Model, r *Row) string {
		return m.fieldCell(r, FieldTemp, func(v float64) string { return fmt.Sprintf("%.0f C", v) })
	}},
	{title: "MEMORY", width: 13, drop: 4, sort: SortMemory, cell: func(m *Model, r *Row) string {
		return m.fieldCell(r, FieldFBUsed, func(used float64) string {
			if total, ok := r.Value(FieldFBTotal); ok && total > 0 {
				return fmt.Sprintf("%.1f/%.0f GiB", used/1024, total/1024)
			}
			return fmt.Sprintf("%.1f GiB", used/1024)
		})
	}},
	{title: "NVLINK TX", width: 10, drop: 5, cell: func(m *Model, r *Row) string { return m.fieldCell(r, FieldNVLinkTX, rate) }},
	{title: "NVLINK RX", width: 10, drop: 5, cell: func(m *Model, r *Row) string { return m.fieldCell(r, FieldNVLinkRX, rate) }},
}

// sparkMin is the narrowest sparkline worth showing.
const sparkMin = 10

// layout picks the columns that fit the width, and the sparkline's width
// (0: none). The GPU column is as wide as its longest name (a MIG
// instance's "0/3 1g.10gb").
func layout(width, gpuWidth int) ([]column, int) {
	all := append([]column(nil), columns...)
	all[0].width = max(all[0].width, min(gpuWidth, 16))
	for maxDrop := 5; maxDrop >= 0; maxDrop-- {
		var cols []column
		used := 0
		for _, c := range all {
			if c.drop <= maxDrop {
				cols = append(cols, c)
				used += c.width + 1
			}
		}
		if used > width {
			continue
		}
		spark := width - used
		if spark < sparkMin {
			spark = 0
		}
		return cols, min(spark, HistoryCap)
	}
	return all[:1], 0
}

// fit pads or cuts s to exactly w cells.
func fit(s string, w int) string {
	if lipgloss.Width(s) > w {
		r := []rune(s)
		for len(r) > 0 && lipgloss.Width(string(r)) > w-1 {
			r = r[:len(r)-1]
		}
		return string(r) + "…"
	}
	return s + strings.Repeat(" ", w-lipgloss.Width(s))
}

var blocks = []rune(" ▁▂▃▄▅▆▇█")

// spark draws values scaled to [0, top] as one line of block characters.
func spark(vals []float64, top float64, width int) string {
	if len(vals) > width {
		vals = vals[len(vals)-width:]
	}
	var b strings.Builder
	for _, v := range vals {
		b.WriteRune(level(v, top, 1, 0))
	}
	return b.String() + strings.Repeat(" ", width-len(vals))
}

// level is the block of line row (0 at the bottom) of a graph rows high.
func level(v, top float64, rows, row int) rune {
	if math.IsNaN(v) || top <= 0 {
		return ' '
	}
	x := v/top*float64(rows) - float64(row)
	switch {
	case x <= 0:
		return ' '
	case x >= 1:
		return blocks[len(blocks)-1]
	}
	i := int(math.Round(x * float64(len(blocks)-1)))
	return blocks[i]
}

// graph draws values as a block graph rows high and width wide.
func graph(vals []float64, top float64, width, rows int) []string {
	if len(vals) > width {
		vals = vals[len(vals)-width:]
	}
	out := make([]string, rows)
	for row := rows - 1; row >= 0; row-- {
		var b strings.Builder
		for _, v := range vals {
			b.WriteRune(level(v, top, rows, row))
		}
		out[rows-1-row] = b.String()
	}
	return out
}

// View renders the screen.
func (m *Model) View() string {
	var lines []string
	title := "gpuscope top · " + m.Address
	if m.Hostname != "" {
		title += " · node " + m.Hostname
	}
	order := "↓"
	if m.reverse {
		order = "↑"
	}
	if m.sortKey == SortGPU {
		order = map[bool]string{false: "↑", true: "↓"}[m.reverse]
	}
	title += fmt.Sprintf(" · %d GPUs · sort: %s %s", m.gpuCount(), m.sortKey, order)
	if m.interval > 0 {
		title += " · every " + m.interval.String()
	}
	lines = append(lines, styleTitle.Render(fit(title, m.width)))
	lines = append(lines, m.banner()...)
	rows := m.sorted()
	if m.cursor >= len(rows) {
		m.cursor = max(len(rows)-1, 0)
	}
	if m.detail && len(rows) > 0 {
		lines = append(lines, m.detailView(rows[m.cursor])...)
	} else {
		lines = append(lines, m.table(rows)...)
	}
	help := "↑/↓ select · enter detail · sort: g gpu  s sm  t tensor  d dram  p power  m memory · r reverse · q quit"
	if m.detail {
		help = "esc back · ↑/↓ another GPU · q quit"
	}
	// The help line sits at the bottom of the screen.
	for len(lines) < m.height-1 {
		lines = append(lines, "")
	}
	if len(lines) > m.height-1 && m.height > 1 {
		lines = lines[:m.height-1]
	}
	lines = append(lines, styleDim.Render(fit(help, m.width)))
	return strings.Join(lines, "\n")
}

func (m *Model) gpuCount() int {
	n := 0
	for _, r := range m.rows {
		if r.Kind == "gpu" {
			n++
		}
	}
	return n
}

func (m *Model) banner() []string {
	switch {
	case m.downErr != nil:
		again := fmt.Sprintf("reconnecting every %s · the values below are the last seen", m.retry)
		if m.retry <= 0 {
			again = "not retrying: the same question would get the same answer; restart top to ask again"
		}
		msg := fmt.Sprintf("✖ %s unreachable for %s: %v · %s",
			m.Address, m.now().Sub(m.downAt).Truncate(time.Second), m.downErr, again)
		var se *sampleapi.StatusError
		if errors.As(m.downErr, &se) {
			// The server answers but refuses: say why, and what to give
			// when it wants a password.
			msg = fmt.Sprintf("✖ %s answered %d %s: %s", m.Address, se.Code, http.StatusText(se.Code), se.Msg)
			if se.Code == http.StatusUnauthorized {
				msg += " · give --username and --password"
			}
			if m.retry > 0 {
				again = fmt.Sprintf("retrying every %s", m.retry)
			}
			msg += " · " + again
		} else if m.retry <= 0 {
			msg = fmt.Sprintf("✖ %s: %v · %s", m.Address, m.downErr, again)
		}
		// The error can quote what the server sent.
		return []string{styleBanner.Render(fit(sampleapi.Printable(msg), m.width))}
	case !m.up:
		return []string{styleDim.Render(fit("connecting to "+m.Address+" …", m.width))}
	}
	return nil
}

func (m *Model) table(rows []*Row) []string {
	gpuWidth := 0
	for _, r := range rows {
		gpuWidth = max(gpuWidth, lipgloss.Width(r.Name))
	}
	cols, sparkW := layout(m.width, gpuWidth)
	var head strings.Builder
	for _, c := range cols {
		t := c.title
		if c.sort != "" && c.sort == m.sortKey {
			// Values sort highest first, GPUs lowest first.
			t += map[bool]string{false: "▼", true: "▲"}[m.reverse != (c.sort == SortGPU)]
		}
		head.WriteString(fit(t, c.width) + " ")
	}
	if sparkW > 0 {
		head.WriteString(fit("SM · last "+m.windowSpan(sparkW), sparkW))
	}
	out := []string{styleHeader.Render(head.String())}
	for i, r := range rows {
		var b strings.Builder
		for _, c := range cols {
			b.WriteString(fit(c.cell(m, r), c.width) + " ")
		}
		line, sp := b.String(), ""
		if sparkW > 0 {
			sp = NA
			if !m.known || m.served[FieldSM] {
				sp = spark(r.historyOf(FieldSM, sparkW), 1, sparkW)
			}
			sp = fit(sp, sparkW)
		}
		// The selected row is one style end to end: a style nested in it
		// would end the highlight where it ends.
		if i == m.cursor {
			line = styleCursor.Render(line + sp)
		} else {
			line += styleSpark.Render(sp)
		}
		out = append(out, line)
	}
	if len(rows) == 0 && m.up {
		out = append(out, "no GPU in the answer")
	}
	return out
}

// windowSpan says how much time width samples cover.
func (m *Model) windowSpan(width int) string {
	if m.interval <= 0 {
		return "samples"
	}
	return (m.interval * time.Duration(width)).String()
}

func (r *Row) historyOf(field string, n int) []float64 {
	h := r.hist[field]
	if h == nil {
		return nil
	}
	return h.last(n)
}

func (m *Model) detailView(r *Row) []string {
	out := []string{styleHeader.Render(fit(fmt.Sprintf("GPU %s detail · %s · pod %s", r.Name, r.Model, orDash(r.Pod)), m.width))}
	graphW := max(m.width-16, 10)
	avail := m.height - 4 - len(out)
	type g struct {
		name, field string
		top         float64
		format      func(float64) string
	}
	graphs := []g{
		{"SM active", FieldSM, 1, percent},
		{"tensor active", FieldTensor, 1, percent},
		{"DRAM active", FieldDRAM, 1, percent},
		{"power", FieldPower, 0, func(v float64) string { return fmt.Sprintf("%.0f W", v) }},
		{"NVLink TX", FieldNVLinkTX, 0, rate},
		{"NVLink RX", FieldNVLinkRX, 0, rate},
	}
	rowsEach := max(min((avail/len(graphs))-1, 6), 1)
	for _, gr := range graphs {
		label := fit(gr.name, 15)
		if m.known && !m.served[gr.field] {
			out = append(out, label+" "+NA)
			continue
		}
		vals := r.historyOf(gr.field, graphW)
		top := gr.top
		if top == 0 {
			for _, v := range vals {
				top = math.Max(top, v)
			}
		}
		cur := "-"
		if v, ok := r.Value(gr.field); ok {
			cur = gr.format(v)
		}
		lines := graph(vals, top, graphW, rowsEach)
		for i, l := range lines {
			prefix := strings.Repeat(" ", 15)
			switch i {
			case 0:
				prefix = label
			case 1:
				prefix = fit(cur, 15)
			}
			out = append(out, prefix+" "+styleSpark.Render(l))
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
