package main

import (
	"fmt"
	"slices"
	"time"

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

// serveFlags declares the serve flags of config.Options, each writing its
// value into in and starting from the option's default.
func serveFlags(in *config.Input) []cli.Flag {
	opts := config.Options(in)
	out := make([]cli.Flag, len(opts))
	for i, o := range opts {
		out[i] = cliFlag(o)
	}
	return out
}

// cliFlag is the urfave/cli flag of one option, by the type of its field.
func cliFlag(o config.Option) cli.Flag {
	name, vars, cat, usage := o.Name, o.EnvVars(), o.Category, o.Usage
	aliases := append(slices.Clip(o.Aliases), o.Deprecated...)
	switch p := o.Value.Field().(type) {
	case *string:
		return &cli.StringFlag{Name: name, Aliases: aliases, EnvVars: vars, Category: cat, Usage: usage,
			Value: o.Value.Default().(string), Destination: p}
	case *bool:
		return &cli.BoolFlag{Name: name, Aliases: aliases, EnvVars: vars, Category: cat, Usage: usage,
			Value: o.Value.Default().(bool), Destination: p}
	case *int:
		return &cli.IntFlag{Name: name, Aliases: aliases, EnvVars: vars, Category: cat, Usage: usage,
			Value: o.Value.Default().(int), Destination: p}
	case *int64:
		return &cli.Int64Flag{Name: name, Aliases: aliases, EnvVars: vars, Category: cat, Usage: usage,
			Value: o.Value.Default().(int64), Destination: p}
	case *float64:
		return &cli.Float64Flag{Name: name, Aliases: aliases, EnvVars: vars, Category: cat, Usage: usage,
			Value: o.Value.Default().(float64), Destination: p}
	case *time.Duration:
		return &cli.DurationFlag{Name: name, Aliases: aliases, EnvVars: vars, Category: cat, Usage: usage,
			Value: o.Value.Default().(time.Duration), Destination: p}
	case *[]string:
		// Read back by config.FillSlices: a StringSliceFlag's destination
		// is a cli.StringSlice, not a []string.
		f := &cli.StringSliceFlag{Name: name, Aliases: aliases, EnvVars: vars, Category: cat, Usage: usage}
		if def := o.Value.Default().([]string); def != nil {
			f.Value = cli.NewStringSlice(def...)
		}
		return f
	}
	panic(fmt.Sprintf("option --%s: no flag for a field of type %T", o.Name, o.Value.Field()))
}

// env lists a subcommand flag's variables.
func env(names ...string) []string { return names }
