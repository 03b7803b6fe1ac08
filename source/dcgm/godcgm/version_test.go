package godcgm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The build information is key:value pairs separated by semicolons
// (go-dcgm v1.4611.0 pkg/dcgm/version_info.go, VersionInfo).
func TestVersionOf(t *testing.T) {
	v, err := versionOf("version:4.6.1;arch:x86_64;buildtype:Release;commit:abc")
	require.NoError(t, err)
	assert.Equal(t, "4.6.1", v)
	_, err = versionOf("arch:x86_64")
	assert.ErrorContains(t, err, "names no version")
}
