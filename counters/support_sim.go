package counters

import "sort"

// simSupport lists the DCGM field IDs the sim source produces. The sim
// package's tests check it against what the simulator emits.
var simSupport = func() map[uint16]bool {
	m := map[uint16]bool{
		1: true, 2: true, 50: true, 51: true, 53: true, 54: true, 56: true, 57: true,
		80: true, 81: true, 82: true, 85: true,
		100: true, 101: true, 112: true, 113: true, 114: true,
		140: true, 150: true, 155: true, 156: true, 157: true, 160: true, 164: true,
		202: true, 203: true, 204: true, 206: true, 207: true, 230: true,
		240: true, 241: true, 242: true, 243: true, 244: true, 245: true,
		250: true, 251: true, 252: true, 253: true,
		310: true, 311: true, 312: true, 313: true,
		390: true, 391: true, 392: true, 393: true, 394: true, 395: true, 396: true,
		526:                     true,
		FieldExpGPUHealthStatus: true, FieldExpP2PStatus: true,
	}
	// NVLink per-link error and bandwidth counters for links 0..17, their
	// totals, and DCGM_FI_PROF_GR_ENGINE_ACTIVE .. DCGM_FI_PROF_NVLINK_RX_BYTES.
	for id := uint16(400); id <= 496; id++ {
		if id != 450 && id != 490 {
			m[id] = true
		}
	}
	for id := uint16(1001); id <= 1012; id++ {
		m[id] = true
	}
	// DCGM_FI_PROF_NVLINK_L0_TX_BYTES .. DCGM_FI_PROF_NVLINK_L17_RX_BYTES.
	for id := uint16(1040); id <= 1075; id++ {
		m[id] = true
	}
	return m
}()

// SimFieldIDs returns the field IDs the sim source produces, sorted.
func SimFieldIDs() []uint16 {
	ids := make([]uint16, 0, len(simSupport))
	for id := range simSupport {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
