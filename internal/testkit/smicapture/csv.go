package smicapture

import (
	"fmt"
	"strings"
)

// parseQueryGPU reads a --query-gpu=... --format=csv section: a header of
// field names (with "[unit]" suffixes), then one row per GPU, matched to
// the -q GPUs by PCI bus ID.
func parseQueryGPU(sn *Snapshot, s section) error {
	var names []string
	for i, l := range s.body {
		if strings.TrimSpace(l) == "" {
			continue
		}
		cells := strings.Split(l, ", ")
		if names == nil {
			for _, c := range cells {
				name, _, _ := strings.Cut(strings.TrimSpace(c), " [")
				names = append(names, name)
			}
			continue
		}
		if len(cells) != len(names) {
			return fmt.Errorf("line %d: --query-gpu row has %d values for %d fields", s.line+4+i, len(cells), len(names))
		}
		row := make(map[string]Value, len(names))
		for j, n := range names {
			row[n] = NewValue(cells[j])
		}
		bus := row["pci.bus_id"].Text()
		var gpu *GPU
		for _, g := range sn.GPUs {
			if strings.EqualFold(g.BusID, bus) {
				gpu = g
			}
		}
		if gpu == nil {
			return fmt.Errorf("line %d: --query-gpu row for bus %q matches no GPU of -q", s.line+4+i, bus)
		}
		gpu.CSV = row
	}
	return nil
}

// parseApps reads --query-compute-apps rows onto their GPUs.
func parseApps(sn *Snapshot, s section) error {
	var names []string
	for i, l := range s.body {
		if strings.TrimSpace(l) == "" {
			continue
		}
		cells := strings.Split(l, ", ")
		if names == nil {
			for _, c := range cells {
				name, _, _ := strings.Cut(strings.TrimSpace(c), " [")
				names = append(names, name)
			}
			continue
		}
		if len(cells) != len(names) {
			return fmt.Errorf("line %d: --query-compute-apps row has %d values for %d fields", s.line+4+i, len(cells), len(names))
		}
		row := map[string]Value{}
		for j, n := range names {
			row[n] = NewValue(cells[j])
		}
		pid, ok := row["pid"].Number()
		if !ok {
			return fmt.Errorf("line %d: pid %q is not a number", s.line+4+i, row["pid"].Raw)
		}
		used, _ := row["used_gpu_memory"].Number()
		bus := row["gpu_bus_id"].Text()
		for _, g := range sn.GPUs {
			if strings.EqualFold(g.BusID, bus) {
				g.Apps = append(g.Apps, App{PID: int(pid), Name: row["process_name"].Text(), UUID: row["gpu_uuid"].Text(), UsedMiB: used})
			}
		}
	}
	return nil
}
