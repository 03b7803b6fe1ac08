package capture

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart sizes: one panel per field, stacked.
const (
	ChartWidth       = 10 * vg.Inch
	ChartPanelHeight = 3 * vg.Inch
	ChartDPI         = 96
)

// ChartSize returns the size in pixels of the PNG chart of n fields.
func ChartSize(n int) (w, h int) {
	return int(math.Round(float64(ChartWidth / vg.Inch * ChartDPI))), int(math.Round(float64(ChartPanelHeight * vg.Length(n) / vg.Inch * ChartDPI)))
}

// maxChartValue bounds the values a chart draws: the plot library computes
// ticks over the span of the values, and a span that overflows a float
// (values near ±1.7e308, which no GPU field reaches) makes it panic or
// search for ticks forever. The trace and CSV formats have no such bound.
const maxChartValue = 1e300

// chartRange returns the finite values' span of a field's series, or an
// error when it is too wide to draw.
func chartRange(c *Capture, field string) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, e := range c.Entities {
		for _, s := range e.Series {
			if s.Field != field || e.Kind != "gpu" {
				continue
			}
			for _, v := range s.V {
				if !math.IsNaN(v) && !math.IsInf(v, 0) {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
		}
	}
	if lo < -maxChartValue || hi > maxChartValue {
		return fmt.Errorf("chart of %s: values from %g to %g cannot be drawn (past ±%g); write a trace or CSV instead", field, lo, hi, maxChartValue)
	}
	return nil
}

// WriteChart draws one panel per field, one line per GPU (GPU entities
// only: MIG instances and links would crowd the lines), time in seconds
// since the first sample on x and the field's unit on y, as "svg" or "png".
func WriteChart(w io.Writer, c *Capture, format string) error {
	if len(c.Fields) == 0 {
		return errors.New("chart: the capture has no field")
	}
	t0, t1, ok := c.Bounds()
	if !ok {
		return errors.New("chart: the capture has no sample")
	}
	var plots [][]*plot.Plot
	for _, f := range c.Fields {
		if err := chartRange(c, f.Name); err != nil {
			return err
		}
		p := plot.New()
		p.Title.Text = f.Name
		// Every panel spans the whole capture, so they line up in time.
		p.X.Label.Text = "seconds since " + time.Unix(0, t0).UTC().Format("15:04:05.000 UTC")
		p.X.Min, p.X.Max = 0, math.Max(float64(t1-t0)/1e9, 0.1)
		p.Y.Label.Text = f.Unit
		if f.Unit == "" {
			p.Y.Label.Text = "value"
		}
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		i := 0
		for _, e := range c.sorted() {
			if e.Kind != "gpu" {
				continue
			}
			for _, s := range e.Series {
				if s.Field != f.Name || len(s.T) == 0 {
					continue
				}
				pts := make(plotter.XYs, 0, len(s.T))
				for j, ts := range s.T {
					if math.IsNaN(s.V[j]) || math.IsInf(s.V[j], 0) {
						continue
					}
					pts = append(pts, plotter.XY{X: float64(ts-t0) / 1e9, Y: s.V[j]})
				}
				l, err := plotter.NewLine(pts)
				if err != nil {
					return fmt.Errorf("chart of %s: %w", f.Name, err)
				}
				l.Color = plotutil.Color(i)
				l.Width = vg.Points(1)
				p.Add(l)
				p.Legend.Add("GPU "+strconv.Itoa(e.GPU), l)
				i++
			}
		}
		plots = append(plots, []*plot.Plot{p})
	}
	width, height := ChartWidth, ChartPanelHeight*vg.Length(len(plots))
	var canvas vg.CanvasWriterTo
	switch format {
	case "png":
		img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(ChartDPI))
		canvas = vgimg.PngCanvas{Canvas: img}
	case "svg":
		canvas = vgsvg.New(width, height)
	default:
		return fmt.Errorf("chart: format %q: use svg or png", format)
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, dc)
	for r := range plots {
		plots[r][0].Draw(canvases[r][0])
	}
	_, err := canvas.WriteTo(w)
	return err
}
