// Package all links every source gpuscope is built with: importing it
// registers each (source.Register), for the program that opens them and the
// configuration that checks --source.
package all

// One line a source.
import (
	_ "github.com/gpuscope/gpuscope/source/auto"
	_ "github.com/gpuscope/gpuscope/source/dcgm/godcgm"
	_ "github.com/gpuscope/gpuscope/source/nvml"
	_ "github.com/gpuscope/gpuscope/source/sim"
)
