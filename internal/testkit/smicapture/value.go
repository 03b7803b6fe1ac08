package smicapture

import (
	"strconv"
	"strings"
)

// Value is one value nvidia-smi printed.
type Value struct {
	// Raw is the text as printed, brackets and unit included.
	Raw string
	// Supported is false for N/A, [Not Supported], a deprecated call and
	// the like: the driver gave no value.
	Supported bool
}

// unsupported lists what nvidia-smi prints, bracketed or not, where the
// driver gave no value.
var unsupported = map[string]bool{
	"N/A": true, "Not Supported": true, "Requested functionality has been deprecated": true,
	"Unknown Error": true, "Insufficient Permissions": true, "": true, "Not Available": true,
}

// NewValue classifies one printed value.
func NewValue(raw string) Value {
	raw = strings.TrimSpace(raw)
	inner := strings.TrimSuffix(strings.TrimPrefix(raw, "["), "]")
	return Value{Raw: raw, Supported: !unsupported[inner]}
}

// Text is the value without brackets.
func (v Value) Text() string { return strings.TrimSuffix(strings.TrimPrefix(v.Raw, "["), "]") }

// Number is the value's leading number ("81559 MiB", "433.78 W", "16x",
// "100.00%", "0x1FF"), false where there is none or the value is not
// supported.
func (v Value) Number() (float64, bool) {
	if !v.Supported {
		return 0, false
	}
	s := v.Text()
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		u, err := strconv.ParseUint(s[2:], 16, 64)
		return float64(u), err == nil
	}
	end := 0
	for end < len(s) && (s[end] == '-' || s[end] == '.' || (s[end] >= '0' && s[end] <= '9')) {
		end++
	}
	f, err := strconv.ParseFloat(s[:end], 64)
	return f, err == nil
}
