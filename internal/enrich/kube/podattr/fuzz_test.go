package podattr

import (
	"strings"
	"testing"
)

// FuzzDeviceKey feeds arbitrary device IDs, as a device plugin might report
// them, to the parser of the kubelet's answer. It never panics, and every
// key it returns names a GPU or MIG instance in one of the forms the
// entities are looked up by, independent of the UUID's case.
func FuzzDeviceKey(f *testing.F) {
	for _, s := range []string{
		"GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17",
		"GPU-3F9A1C2E-7B4D-4E8A-9C1F-2A6B8D0E4F17::3",
		"GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17-12",
		"MIG-a1b2c3d4-e5f6-5789-9abc-def012345678",
		"MIG-GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17/3/0",
		"nvidia0", "nvidia7/gi3/vgpu1", "nvidia99999999999999999999", "nvidia0/gi99999999999999999999",
		"", " ", "GPU-", "MIG-\xff", "nvidia-1",
	} {
		f.Add(s)
	}
	prefixes := []string{keyUUID + "GPU-", keyMIG + "MIG-", keyGI + "GPU-", keyIndex, keyIdxGI}
	f.Fuzz(func(t *testing.T, id string) {
		key, err := deviceKey(id)
		if err != nil {
			if key != "" {
				t.Fatalf("key %q with error %v", key, err)
			}
			return
		}
		ok := false
		for _, p := range prefixes {
			ok = ok || strings.HasPrefix(key, p)
		}
		if !ok {
			t.Fatalf("device ID %q gave key %q", id, key)
		}
		if !strings.HasPrefix(key, keyUUID) && !strings.HasPrefix(key, keyMIG) {
			return
		}
		upper, err := deviceKey(strings.ToUpper(id))
		if err != nil || upper != key {
			t.Fatalf("the UUID's case changes the key: %q and %q", key, upper)
		}
	})
}
