package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/client/top"
)

func topCommand() *cli.Command {
	return &cli.Command{
		Name:  "top",
		Usage: "a live terminal view of one node from a running gpuscope: one row per GPU or MIG instance",
		Description: "top reads /api/v1/stream of the gpuscope at --address and refreshes at its sampling rate: pod, SM, " +
			"tensor and DRAM activity, power, temperature, memory, NVLink traffic and a sparkline of SM activity per GPU. " +
			"Keys: up/down select, enter opens a detail pane with larger graphs, g s t d p m sort by gpu, SM, tensor, " +
			"DRAM, power or memory, r reverses, q quits. A field the node does not serve shows n/a.",
		Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usage(fmt.Errorf("top: unexpected argument %q", c.Args().First()))
			}
			client, err := clientFrom(c)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := top.Run(ctx, client, nil, nil); err != nil {
				return fmt.Errorf("top: %w", err)
			}
			return nil
		},
	}
}
