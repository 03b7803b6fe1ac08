package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/config"
)

// helpWidth is the widest line of the help pages.
const helpWidth = 120

// usageWidth is how wide a flag's usage column may be: the widest flag
// name column ("   --kubernetes-pod-label-allowlist-regex value" and
// tabwriter's padding) takes the rest of helpWidth.
const usageWidth = 68

func init() {
	cli.FlagStringer = flagHelp
	// Command usages and descriptions are wrapped at the same width.
	cli.HelpPrinter = func(w io.Writer, templ string, data interface{}) {
		cli.HelpPrinterCustom(w, templ, data, map[string]interface{}{"wrapAt": func() int { return helpWidth }})
	}
}

// flagHelp is one flag's help entry: its first name with its one-letter
// aliases, then its usage, default and first variable, wrapped into the
// usage column. Longer aliases and further variables (dcgm-exporter's)
// are listed once, in compatNames, instead of in every entry.
func flagHelp(f cli.Flag) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return ""
	}
	names := f.Names()
	head := "--" + names[0]
	for _, a := range names[1:] {
		if len(a) == 1 {
			head += ", -" + a
		}
	}
	if df.TakesValue() {
		head += " value"
	}
	text := df.GetUsage()
	if d := df.GetDefaultText(); d != "" && d != `""` && d != "false" {
		text += " (default: " + d + ")"
	}
	if vars := df.GetEnvVars(); len(vars) > 0 {
		text += " [$" + vars[0] + "]"
	}
	return head + "\t" + strings.Join(wrapWords(text, usageWidth), "\n\t")
}

// wrapWords breaks text into lines of at most width columns, between words.
func wrapWords(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// compatNames is the help's list of the other names flags answer to:
// dcgm-exporter's long names and variables, one line per flag, then
// gpuscope's deprecated spellings.
func compatNames(flags []cli.Flag) string {
	deprecated := map[string]string{}
	var old strings.Builder
	for _, o := range config.Options(&config.Input{}) {
		for _, d := range o.Deprecated {
			deprecated[d] = o.Name
			fmt.Fprintf(&old, "   --%s\t--%s\n", d, o.Name)
		}
	}
	var b strings.Builder
	b.WriteString("\nDCGM-EXPORTER NAMES:\n   dcgm-exporter's flags and variables work unchanged; " +
		"each is the gpuscope flag named before it.\n\n")
	for _, f := range flags {
		var other []string
		for _, a := range f.Names()[1:] {
			if _, dep := deprecated[a]; len(a) > 1 && !dep {
				other = append(other, "--"+a)
			}
		}
		if ev, ok := f.(cli.DocGenerationFlag); ok && len(ev.GetEnvVars()) > 1 {
			for _, v := range ev.GetEnvVars()[1:] {
				other = append(other, "$"+v)
			}
		}
		if len(other) > 0 {
			fmt.Fprintf(&b, "   --%s\t%s\n", f.Names()[0], strings.Join(other, ", "))
		}
	}
	if old.Len() > 0 {
		intro := "gpuscope's earlier dotted spellings still work, with a warning in the log at start; " +
			"use the name after each. Their variables are unchanged."
		b.WriteString("\nDEPRECATED NAMES:\n   " + strings.Join(wrapWords(intro, helpWidth-3), "\n   ") + "\n\n")
		b.WriteString(old.String())
	}
	return b.String()
}
