package counters

// Statistic is one window statistic: its name, by which a counters file
// asks for it and the stat label shows it, and what it is.
type Statistic struct {
	Name string
	Of   StatKind
	// Q is the quantile, for Of == Quantile.
	Q float64
}

// StatKind is what a statistic is.
type StatKind uint8

// The kinds of window statistics.
const (
	Least StatKind = iota + 1
	Greatest
	Mean
	Quantile
)

// Statistics are the window statistics, in the order they are exported. A
// new statistic is one entry here: counters files accept its name, the
// engine writes it, /fields offers it, and internal/engine/window computes
// it over each series' window.
var Statistics = []Statistic{
	{Name: "min", Of: Least},
	{Name: "max", Of: Greatest},
	{Name: "avg", Of: Mean},
	{Name: "p50", Of: Quantile, Q: 0.50},
	{Name: "p90", Of: Quantile, Q: 0.90},
	{Name: "p99", Of: Quantile, Q: 0.99},
}
