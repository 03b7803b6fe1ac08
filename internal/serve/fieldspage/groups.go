package fieldspage

import (
	"strings"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// groups are the page's sections, in order: the profiling fields first, as
// they are what a node is usually tuned for and what costs the most.
var groups = []string{
	"Profiling", "Utilization", "Memory", "Clocks and power", "Errors and health",
	"NVLink and NvSwitch", "MIG", "Device and driver",
}

// groupWords sort a field into the first group one of whose words its
// name contains; the order matters (NVLink error counters are NVLink's).
var groupWords = []struct {
	group string
	words []string
}{
	{"Profiling", []string{"DCGM_FI_PROF_"}},
	{"Device and driver", []string{"INFOROM_VER", "VERSION", "VBIOS", "_NAME", "BRAND", "SERIAL", "UUID", "BUSID"}},
	{"MIG", []string{"_MIG_", "GPU_I_", "_CI_"}},
	{"NVLink and NvSwitch", []string{"NVLINK", "NVSWITCH", "C2C", "_NVL"}},
	{"Errors and health", []string{"ECC", "XID", "RETIRED", "REMAP", "REPLAY", "ERROR", "ERR_", "HEALTH", "VIOLATION", "FAULT", "EVENT", "THROTTLE", "BANKS", "INFOROM_CONFIG_VALID"}},
	{"Clocks and power", []string{"CLOCK", "CLK", "POWER", "ENERGY", "TEMP", "FAN", "PSTATE", "VOLT"}},
	{"Memory", []string{"FB_", "MEM", "BAR1", "DRAM"}},
	{"Utilization", []string{"UTIL", "ACTIVE", "PCIE_TX", "PCIE_RX"}},
}

// groupOf is the section a field is listed in.
func groupOf(info counters.FieldInfo) string {
	// DCGM reads the profiling fields per GPU instance; they are still
	// the profiling fields, MIG or not.
	if strings.HasPrefix(info.Name, "DCGM_FI_PROF_") {
		return "Profiling"
	}
	// DCGM keeps many GPU fields (XIDs, say) at the GPU-instance level
	// too, so MIG fields are told by name; switch and link levels are
	// never anything but NVLink's.
	if info.Level == fieldid.LevelNvSwitch || info.Level == fieldid.LevelLink {
		return "NVLink and NvSwitch"
	}
	for _, g := range groupWords {
		for _, w := range g.words {
			if strings.Contains(info.Name, w) {
				return g.group
			}
		}
	}
	return "Device and driver"
}
