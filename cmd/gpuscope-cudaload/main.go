// Command gpuscope-cudaload loads one GPU without a CUDA toolkit, for
// scripts/gpu-check.sh: it opens the driver's libcuda.so.1, has the driver
// compile an embedded PTX kernel, allocates and fills a large buffer, then
// alternates a fused multiply-add loop on every SM with host-to-device
// copies until its time is up. It prints "ready ..." once the memory is
// held and a JSON summary of what it did at the end, which the check holds
// gpuscope's series against.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"github.com/urfave/cli/v2"
)

//go:embed fma.ptx
var fmaPTX string

func main() {
	app := &cli.App{
		Name:  "gpuscope-cudaload",
		Usage: "load one GPU through libcuda.so.1 (no CUDA toolkit): hold memory, run FMA on every SM, copy host to device",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "device", Value: 0, Usage: "CUDA device ordinal", EnvVars: []string{"GPUSCOPE_CUDALOAD_DEVICE"}},
			&cli.Float64Flag{Name: "memory-gib", Value: 8, Usage: "GPU memory to allocate and fill, GiB", EnvVars: []string{"GPUSCOPE_CUDALOAD_MEMORY_GIB"}},
			&cli.DurationFlag{Name: "duration", Value: time.Minute, Usage: "how long to load the GPU", EnvVars: []string{"GPUSCOPE_CUDALOAD_DURATION"}},
			&cli.IntFlag{Name: "copy-mib", Value: 256, Usage: "size of each host-to-device copy, MiB", EnvVars: []string{"GPUSCOPE_CUDALOAD_COPY_MIB"}},
			&cli.DurationFlag{Name: "kernel-time", Value: 50 * time.Millisecond, Usage: "the FMA kernel's target run time per launch", EnvVars: []string{"GPUSCOPE_CUDALOAD_KERNEL_TIME"}},
		},
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg := config{
				device: c.Int("device"), memBytes: uint64(c.Float64("memory-gib") * (1 << 30)),
				duration: c.Duration("duration"), copyBytes: uint64(c.Int("copy-mib")) << 20,
				kernelTime: c.Duration("kernel-time"),
			}
			if err := cfg.validate(); err != nil {
				return err
			}
			sum, err := load(ctx, cfg, os.Stdout)
			if err != nil {
				return err
			}
			return json.NewEncoder(os.Stdout).Encode(sum)
		},
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "gpuscope-cudaload:", err)
		os.Exit(1)
	}
}

type config struct {
	device     int
	memBytes   uint64
	duration   time.Duration
	copyBytes  uint64
	kernelTime time.Duration
}

func (c config) validate() error {
	switch {
	case c.device < 0:
		return fmt.Errorf("--device %d: a CUDA device ordinal is 0 or more", c.device)
	case c.copyBytes == 0:
		return fmt.Errorf("--copy-mib must be at least 1")
	case c.memBytes < 2*c.copyBytes:
		return fmt.Errorf("--memory-gib %.3g: at least twice --copy-mib (%d MiB) is needed", float64(c.memBytes)/(1<<30), c.copyBytes>>20)
	case c.duration <= 0 || c.kernelTime <= 0:
		return fmt.Errorf("--duration and --kernel-time must be positive")
	}
	return nil
}

// Summary is what the load did, for the check to compare gpuscope's
// series with.
type Summary struct {
	PID            int     `json:"pid"`
	ProcessName    string  `json:"process_name"`
	Device         int     `json:"device"`
	DeviceName     string  `json:"device_name"`
	SMs            int     `json:"sms"`
	AllocatedBytes uint64  `json:"allocated_bytes"`
	Kernels        int     `json:"kernels"`
	KernelIters    uint32  `json:"kernel_iters"`
	KernelSeconds  float64 `json:"kernel_seconds"`
	H2DBytes       uint64  `json:"h2d_bytes"`
	H2DSeconds     float64 `json:"h2d_seconds"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// H2DBytesPerSecond is the copies' average over the whole load, the
	// rate a PCIe counter averaged over the load should show.
	H2DBytesPerSecond float64 `json:"h2d_bytes_per_second"`
}

const (
	threadsPerBlock = 256
	blocksPerSM     = 8 // 2048 threads: a full SM on Volta and later
	minIters        = 1 << 10
	maxIters        = 1 << 26
)

// load runs the load on one device and returns what it did. It writes a
// "ready" line to w once the memory is allocated and filled.
func load(ctx context.Context, cfg config, w io.Writer) (Summary, error) {
	sum := Summary{PID: os.Getpid(), ProcessName: filepath.Base(os.Args[0]), Device: cfg.device}
	g, err := prepare(cfg, &sum)
	if g != nil {
		defer g.close()
	}
	if err != nil {
		return sum, err
	}
	fmt.Fprintf(w, "ready pid=%d device=%d name=%q sms=%d allocated_bytes=%d\n", sum.PID, cfg.device, sum.DeviceName, sum.SMs, sum.AllocatedBytes)
	return sum, g.run(ctx, cfg, &sum)
}

// gpu is what the load holds on the device; close gives it back in
// reverse order.
type gpu struct {
	cu     *cuda
	fn     unsafe.Pointer
	buf    uint64
	host   unsafe.Pointer
	undo   []func()
	blocks uint32
}

func (g *gpu) close() {
	for i := len(g.undo) - 1; i >= 0; i-- {
		g.undo[i]()
	}
}

// prepare opens the device, compiles the kernel and holds the memory. The
// gpu it returns, even with an error, holds what must be given back.
func prepare(cfg config, sum *Summary) (*gpu, error) {
	cu, err := openCUDA()
	if err != nil {
		return nil, err
	}
	n, err := cu.deviceCount()
	if err != nil {
		return nil, err
	}
	if cfg.device >= n {
		return nil, fmt.Errorf("--device %d: the driver lists %d CUDA devices", cfg.device, n)
	}
	dev, err := cu.device(cfg.device)
	if err != nil {
		return nil, err
	}
	if sum.DeviceName, err = cu.deviceName(dev); err != nil {
		return nil, err
	}
	if sum.SMs, err = cu.smCount(dev); err != nil {
		return nil, err
	}
	g := &gpu{cu: cu, blocks: uint32(max(sum.SMs, 1) * blocksPerSM)}
	release, err := cu.useDevice(dev)
	if err != nil {
		return nil, err
	}
	g.undo = append(g.undo, release)
	fn, unload, err := cu.loadKernel(fmaPTX, "fma_loop")
	if err != nil {
		return g, err
	}
	g.fn, g.undo = fn, append(g.undo, unload)
	if g.buf, err = cu.alloc(cfg.memBytes); err != nil {
		return g, err
	}
	g.undo = append(g.undo, func() { cu.free(g.buf) })
	sum.AllocatedBytes = cfg.memBytes
	// Filling the buffer makes every page resident, so the framebuffer
	// counters show all of it; 1.0f keeps the kernel's input finite.
	if err := cu.memset32(g.buf, 0x3f800000, cfg.memBytes/4); err != nil {
		return g, err
	}
	if g.host, err = cu.allocHost(cfg.copyBytes); err != nil {
		return g, err
	}
	g.undo = append(g.undo, func() { cu.freeHost(g.host) })
	return g, cu.sync()
}

// run alternates the FMA kernel and one copy until the time is up.
func (g *gpu) run(ctx context.Context, cfg config, sum *Summary) error {
	threads := g.blocks * threadsPerBlock
	iters := uint32(minIters)
	start := time.Now()
	deadline := start.Add(cfg.duration)
	span := cfg.memBytes - cfg.copyBytes
	for off := uint64(0); time.Now().Before(deadline) && ctx.Err() == nil; {
		t0 := time.Now()
		if err := g.cu.launch(g.fn, g.blocks, g.buf, threads, iters); err != nil {
			return err
		}
		if err := g.cu.sync(); err != nil {
			return err
		}
		took := time.Since(t0)
		sum.Kernels++
		sum.KernelSeconds += took.Seconds()
		sum.KernelIters = iters
		// Grow the loop until one launch takes about the target time, so
		// launch gaps stay a small share of the SMs' time on any GPU.
		if took < cfg.kernelTime/2 && iters < maxIters {
			iters *= 2
		}
		t1 := time.Now()
		if err := g.cu.copyToDevice(g.buf+off, g.host, cfg.copyBytes); err != nil {
			return err
		}
		sum.H2DSeconds += time.Since(t1).Seconds()
		sum.H2DBytes += cfg.copyBytes
		off = (off + cfg.copyBytes) % span
	}
	sum.ElapsedSeconds = time.Since(start).Seconds()
	if sum.ElapsedSeconds > 0 {
		sum.H2DBytesPerSecond = float64(sum.H2DBytes) / sum.ElapsedSeconds
	}
	return nil
}
