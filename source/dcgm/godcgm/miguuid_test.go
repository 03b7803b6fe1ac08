package godcgm

import (
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

// TestMIGInstancesGetTheirUUIDThroughNVML: go-dcgm's MIG entity info
// (MigEntityInfo in go-dcgm's pkg/dcgm/mig.go) has no MIG UUID, so the
// adapter asks NVML for the MIG devices of each GPU and matches them by GPU
// instance ID, as dcgm-exporter maps the device plugin's MIG-<uuid> IDs
// (internal/pkg/nvmlprovider/provider.go, GetMIGDeviceInfoByID). Without it
// no pod is attributed to a MIG instance.
func TestMIGInstancesGetTheirUUIDThroughNVML(t *testing.T) {
	lib := nvmlfake.New(nvmlfake.DGXA100)
	ins := lib.EnableMIG(1, gonvml.GPU_INSTANCE_PROFILE_3_SLICE, gonvml.GPU_INSTANCE_PROFILE_1_SLICE)
	gpus := []dcgm.GPUInfo{{ID: 0, UUID: lib.GPUs[0].UUID}, {ID: 1, UUID: lib.GPUs[1].UUID}}
	gi := func(id uint) dcgm.EntityRef { return dcgm.EntityRef{Group: dcgm.EntityGPUInstance, ID: id} }
	ci := func(id uint) dcgm.EntityRef { return dcgm.EntityRef{Group: dcgm.EntityComputeInstance, ID: id} }
	gpu1 := dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 1}
	host := dcgmfake.New(dcgmfake.WithGPUs(gpus...), dcgmfake.WithMIG(
		dcgm.MIGInfo{Entity: gi(7), Parent: gpu1, GPU: 1, InstanceID: uint(ins[0].GI.Info.Id)},
		dcgm.MIGInfo{Entity: gi(8), Parent: gpu1, GPU: 1, InstanceID: uint(ins[1].GI.Info.Id)},
		dcgm.MIGInfo{Entity: ci(9), Parent: gi(8), GPU: 1, InstanceID: uint(ins[1].GI.Info.Id)},
		// An instance NVML does not list (created since) keeps no UUID.
		dcgm.MIGInfo{Entity: gi(10), Parent: gpu1, GPU: 1, InstanceID: 13},
	))
	require.NoError(t, host.Connect(dcgm.ConnectParams{Mode: dcgm.ModeEmbedded}))
	plain, err := host.MIGHierarchy()
	require.NoError(t, err)
	for _, m := range plain {
		require.Empty(t, m.MIGUUID, "the fake, like go-dcgm, knows no MIG UUID")
	}

	log, _ := test.NewNullLogger()
	migs, err := WithMIGUUIDs(host, lib, log).MIGHierarchy()
	require.NoError(t, err)
	got := map[dcgm.EntityRef]string{}
	for _, m := range migs {
		got[m.Entity] = m.MIGUUID
	}
	assert.Equal(t, map[dcgm.EntityRef]string{
		gi(7): ins[0].UUID, gi(8): ins[1].UUID, ci(9): ins[1].UUID, gi(10): "",
	}, got)
}

// TestMIGUUIDsWithoutNVML: when NVML cannot be read the hierarchy comes
// back as the host engine gave it, and the reason is logged.
func TestMIGUUIDsWithoutNVML(t *testing.T) {
	lib := nvmlfake.New(nvmlfake.DGXA100)
	ins := lib.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_3_SLICE)
	lib.GPUs[0].Errs = map[string]gonvml.Return{"GetMigDeviceHandleByIndex": gonvml.ERROR_NO_PERMISSION}
	host := dcgmfake.New(dcgmfake.WithGPUs(dcgm.GPUInfo{ID: 0, UUID: lib.GPUs[0].UUID}), dcgmfake.WithMIG(
		dcgm.MIGInfo{Entity: dcgm.EntityRef{Group: dcgm.EntityGPUInstance, ID: 1}, Parent: dcgm.EntityRef{Group: dcgm.EntityGPU}, InstanceID: uint(ins[0].GI.Info.Id)}))
	require.NoError(t, host.Connect(dcgm.ConnectParams{Mode: dcgm.ModeEmbedded}))
	log, hook := test.NewNullLogger()
	migs, err := WithMIGUUIDs(host, lib, log).MIGHierarchy()
	require.NoError(t, err)
	require.Len(t, migs, 1)
	assert.Empty(t, migs[0].MIGUUID)
	require.NotNil(t, hook.LastEntry())
	assert.Contains(t, hook.LastEntry().Message, "MIG UUID")
}
