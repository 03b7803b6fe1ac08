package podattr

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The device plugins report the same GPU in several spellings. Each form is
// reduced to a key that an entity can be looked up by, so the scrape path does
// one map lookup per entity.
var (
	uuidBody = `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`
	// GPU-<uuid>, optionally time-sliced as GPU-<uuid>::N or GPU-<uuid>-N.
	gpuIDRe = regexp.MustCompile(`^(GPU-` + uuidBody + `)(?:::\d+|-\d+)?$`)
	// MIG-<uuid> (R470 and later), optionally time-sliced.
	migIDRe = regexp.MustCompile(`^(MIG-` + uuidBody + `)(?:::\d+|-\d+)?$`)
	// MIG-GPU-<uuid>/<gi>/<ci>, the form of drivers before R470.
	legacyMIGRe = regexp.MustCompile(`^MIG-(GPU-` + uuidBody + `)/(\d+)/(\d+)(?:::\d+)?$`)
	// GKE: nvidia0, nvidia0/gi3, nvidia0/gi3/vgpu1, nvidia0/vgpu1.
	gkeRe = regexp.MustCompile(`^nvidia(\d+)(?:/gi(\d+))?(?:/vgpu(\d+))?$`)
)

// Key prefixes of the owner map.
const (
	keyUUID  = "uuid/"  // GPU UUID
	keyMIG   = "mig/"   // MIG device UUID
	keyGI    = "gi/"    // parent GPU UUID + "/" + GPU instance ID
	keyIndex = "idx/"   // GPU index
	keyIdxGI = "idxgi/" // GPU index + "/" + GPU instance ID
)

// deviceKey turns a device ID reported by the kubelet into the key of the
// GPU or MIG instance it names.
func deviceKey(id string) (string, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return "", fmt.Errorf("empty device ID")
	}
	if m := gpuIDRe.FindStringSubmatch(id); m != nil {
		return keyUUID + normUUID(m[1]), nil
	}
	if m := migIDRe.FindStringSubmatch(id); m != nil {
		return keyMIG + normUUID(m[1]), nil
	}
	if m := legacyMIGRe.FindStringSubmatch(id); m != nil {
		return keyGI + normUUID(m[1]) + "/" + m[2], nil
	}
	if m := gkeRe.FindStringSubmatch(id); m != nil {
		idx, err := strconv.Atoi(m[1])
		if err != nil {
			return "", fmt.Errorf("device ID %q: GPU index: %w", id, err)
		}
		if m[2] != "" {
			gi, err := strconv.Atoi(m[2])
			if err != nil {
				return "", fmt.Errorf("device ID %q: GPU instance: %w", id, err)
			}
			return keyIdxGI + strconv.Itoa(idx) + "/" + strconv.Itoa(gi), nil
		}
		return keyIndex + strconv.Itoa(idx), nil
	}
	return "", fmt.Errorf("device ID %q: unknown form (want GPU-<uuid>, MIG-<uuid>, <uuid>::N, <uuid>-N, nvidiaN or nvidiaN/giM)", id)
}

// normUUID lower-cases the hex part of a GPU or MIG UUID, so keys built from
// the kubelet's answer and from the source's entities compare equal.
func normUUID(u string) string {
	if len(u) > 4 && (strings.HasPrefix(u, "GPU-") || strings.HasPrefix(u, "MIG-")) {
		return u[:4] + strings.ToLower(u[4:])
	}
	return u
}

// CheckResourceName refuses a resource name that matches nothing: empty, or
// with a wildcard other than a trailing '*'.
func CheckResourceName(n string) error {
	if strings.TrimSpace(n) == "" || strings.Contains(strings.TrimSuffix(n, "*"), "*") {
		return fmt.Errorf("%q is not a resource name (a trailing '*' is the only wildcard)", n)
	}
	return nil
}
