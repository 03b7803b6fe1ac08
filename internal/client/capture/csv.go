package capture

import (
	"encoding/csv"
	"io"
	"math"
	"strconv"
)

// CSVHeader is the first row of WriteCSV.
var CSVHeader = []string{"time_unix_ns", "node", "gpu", "entity", "field", "unit", "value", "uuid", "pod", "namespace", "container"}

// WriteCSV writes one row per sample, by entity and field, oldest first. A
// value that is not a number is an empty cell.
func WriteCSV(w io.Writer, c *Capture) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	row := make([]string, len(CSVHeader))
	for _, e := range c.sorted() {
		for _, s := range e.Series {
			f, _ := c.field(s.Field)
			for i, ts := range s.T {
				v := ""
				if !math.IsNaN(s.V[i]) && !math.IsInf(s.V[i], 0) {
					v = strconv.FormatFloat(s.V[i], 'g', -1, 64)
				}
				row = append(row[:0], strconv.FormatInt(ts, 10), c.Hostname, strconv.Itoa(e.GPU), e.Key, s.Field, f.Unit, v,
					e.Labels["UUID"], e.Labels["pod"], e.Labels["namespace"], e.Labels["container"])
				if err := cw.Write(row); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
