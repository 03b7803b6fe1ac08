package godcgm

import (
	"fmt"
	"strings"

	nvdcgm "github.com/NVIDIA/go-dcgm/pkg/dcgm"
)

// HostEngineVersion implements dcgm.Client: the "version" key of the host
// engine's build information ("version:4.6.1;arch:x86_64;...").
func (c *Client) HostEngineVersion() (string, error) {
	if !c.connected {
		return "", errNotConnected
	}
	info, err := nvdcgm.GetHostengineVersionInfo()
	if err != nil {
		return "", wrap("reading the host engine's version", err)
	}
	return versionOf(info.RawBuildInfoString)
}

func versionOf(raw string) (string, error) {
	for _, kv := range strings.Split(raw, ";") {
		if k, v, ok := strings.Cut(kv, ":"); ok && strings.TrimSpace(k) == "version" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("host engine build information %q names no version", raw)
}
