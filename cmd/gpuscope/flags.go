package main

import (
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/config"
)

// Help categories of the serve flags.
const (
	catCollection = config.CatCollection
	catLabels     = config.CatLabels
	catSources    = config.CatSources
	catSim        = config.CatSim
	catKubernetes = config.CatKubernetes
	catWeb        = config.CatWeb
	catAPI        = config.CatAPI
	catLogging    = config.CatLogging
)

// serveFlags declares the serve flags, each writing its value into in:
// config.Options defines them.
func serveFlags(in *config.Input) []cli.Flag { return config.Flags(in) }

// env lists a subcommand flag's variables.
func env(names ...string) []string { return names }
