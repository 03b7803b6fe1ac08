package godcgm

import (
	"fmt"

	nvdcgm "github.com/NVIDIA/go-dcgm/pkg/dcgm"

	"github.com/gpuscope/gpuscope/source/dcgm"
)

// toValues converts go-dcgm's values, leaving out the types gpuscope does
// not read (binary blobs).
func toValues(vals []nvdcgm.FieldValue_v2) []dcgm.Value {
	out := make([]dcgm.Value, 0, len(vals))
	for i := range vals {
		fv := &vals[i]
		v := dcgm.Value{
			Entity:  toRef(nvdcgm.GroupEntityPair{EntityGroupId: fv.EntityGroupId, EntityId: fv.EntityID}),
			FieldID: uint16(fv.FieldID), TS: fv.TS, Status: fv.Status,
		}
		switch fv.FieldType {
		case nvdcgm.DCGM_FT_INT64, nvdcgm.DCGM_FT_TIMESTAMP:
			v.Kind, v.Int = dcgm.KindInt64, fv.Int64()
		case nvdcgm.DCGM_FT_DOUBLE:
			v.Kind, v.Float = dcgm.KindFloat64, fv.Float64()
		case nvdcgm.DCGM_FT_STRING:
			v.Kind = dcgm.KindString
			if fv.StringValue != nil {
				v.Str = *fv.StringValue
			}
		default:
			if fv.Status == dcgm.StatusOK {
				continue
			}
			// A refused pair has no type to read, but its status counts.
		}
		out = append(out, v)
	}
	return out
}

// LatestValues implements dcgm.Client with dcgmEntitiesGetLatestValues,
// which gives each pair its own status, as dcgm-exporter reads its fields
// (internal/pkg/deviceinfo/device_info.go).
func (c *Client) LatestValues(entities []dcgm.EntityRef, fields []uint16) ([]dcgm.Value, error) {
	if !c.connected {
		return nil, errNotConnected
	}
	if n := len(entities) * len(fields); n == 0 || n > dcgm.MaxLatestValues {
		return nil, fmt.Errorf("reading latest values: %d entities x %d fields, want 1 to %d values", len(entities), len(fields), dcgm.MaxLatestValues)
	}
	pairs := make([]nvdcgm.GroupEntityPair, len(entities))
	for i, e := range entities {
		pairs[i] = nvdcgm.GroupEntityPair{EntityGroupId: toFE(e.Group), EntityId: e.ID}
	}
	ids := make([]nvdcgm.Short, len(fields))
	for i, f := range fields {
		ids[i] = nvdcgm.Short(f)
	}
	vals, err := nvdcgm.EntitiesGetLatestValues(pairs, ids, 0)
	if err != nil {
		return nil, wrap("reading latest values", err)
	}
	return toValues(vals), nil
}
