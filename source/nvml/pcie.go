package nvml

import gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

// The PCIe link generation and width, as DCGM reads them (DCGM,
// dcgmlib/src/DcgmCacheManager.cpp: DCGM_FI_DEV_PCIE_LINK_GEN from
// nvmlDeviceGetCurrPcieLinkGeneration, DCGM_FI_DEV_PCIE_MAX_LINK_GEN from
// nvmlDeviceGetMaxPcieLinkGeneration, the widths likewise): what
// nvidia-smi shows as pcie.link.gen.current, .max, pcie.link.width.current
// and .max. A link that trained below its maximum (a GPU in a Gen3 slot,
// or at x8) shows here and nowhere else.

func pcieLink(name string, get func(gonvml.Device) (int, gonvml.Return)) func(r *reading) (float64, error) {
	return func(r *reading) (float64, error) {
		v, ret := get(r.h)
		return float64(v), nvmlErr(name, ret)
	}
}

var (
	readPCIeLinkGen      = pcieLink("GetCurrPcieLinkGeneration", gonvml.Device.GetCurrPcieLinkGeneration)
	readPCIeMaxLinkGen   = pcieLink("GetMaxPcieLinkGeneration", gonvml.Device.GetMaxPcieLinkGeneration)
	readPCIeLinkWidth    = pcieLink("GetCurrPcieLinkWidth", gonvml.Device.GetCurrPcieLinkWidth)
	readPCIeMaxLinkWidth = pcieLink("GetMaxPcieLinkWidth", gonvml.Device.GetMaxPcieLinkWidth)
)
