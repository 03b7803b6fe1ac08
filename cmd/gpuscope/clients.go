package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"
)

// clientBinary is the binary that holds top, capture and report. The
// terminal UI and the chart renderer live there so that the exporter's
// resident set carries none of their code or fonts.
const clientBinary = "gpuscope-client"

// clientCommands are gpuscope's top, capture and report: each runs
// gpuscope-client with the same arguments, so the command line users know
// keeps working.
func clientCommands() []*cli.Command {
	return []*cli.Command{
		clientCommand("capture", "record a running gpuscope's raw samples as a Chrome trace (Perfetto), a chart (svg, png) or CSV"),
		clientCommand("top", "a live terminal view of one node from a running gpuscope: one row per GPU or MIG instance"),
		clientCommand("report", "the GPU efficiency summary of a pod, a namespace or an HPC job over a time range, from Prometheus"),
	}
}

func clientCommand(name, usageText string) *cli.Command {
	return &cli.Command{
		Name:  name,
		Usage: usageText,
		Description: "Runs " + clientBinary + " " + name + ", installed beside gpuscope; `gpuscope " + name +
			" --help` lists its flags.",
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			path, err := findClient(os.Executable, exec.LookPath)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			argv := append([]string{path, name}, c.Args().Slice()...)
			if err := syscall.Exec(path, argv, os.Environ()); err != nil {
				return fmt.Errorf("%s: running %s: %w", name, path, err)
			}
			return nil
		},
	}
}

// findClient looks for gpuscope-client beside the running binary (the
// image, the release archive and make build put it there), then on PATH.
func findClient(self func() (string, error), lookPath func(string) (string, error)) (string, error) {
	if exe, err := self(); err == nil {
		if resolved, err := filepath.EvalSymlinks(exe); err == nil {
			exe = resolved
		}
		beside := filepath.Join(filepath.Dir(exe), clientBinary)
		if fi, err := os.Stat(beside); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	path, err := lookPath(clientBinary)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("%s is neither beside gpuscope nor on PATH; install it from the same release (make build builds both)", clientBinary)
		}
		return "", fmt.Errorf("looking for %s on PATH: %w", clientBinary, err)
	}
	return path, nil
}
