package gpucheck

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/etc"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// simScrape renders what gpuscope serves for a seeded simulated node after
// three seconds of 100 ms samples: a truthful exposition the check must pass.
func simScrape(t *testing.T, gpus int) ([]byte, *counters.Set) {
	t.Helper()
	set, err := counters.Parse("etc/dcp-metrics.csv", etc.DCPMetrics())
	require.NoError(t, err)
	clk := sourcetest.NewClock(time.Unix(1_750_000_000, 0))
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.Seed, cfg.Now, cfg.Hostname = gpus, 7, clk.Now, "check-node"
	src, err := sim.New(cfg)
	require.NoError(t, err)
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	e, err := engine.New(engine.Options{
		Source: src, Counters: set, DefaultInterval: time.Second, Window: 2 * time.Second,
		Hostname: "check-node", Now: clk.Now, Log: logrus.NewEntry(quiet),
	})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	for range 30 {
		clk.Add(100 * time.Millisecond)
		require.NoError(t, e.CollectAll(context.Background()))
	}
	return e.Render(nil), set
}

func TestTruthfulSimulatedNodePasses(t *testing.T) {
	body, set := simScrape(t, 2)
	rep, err := Check(Input{Exposition: body, Counters: set, GPUs: 2, ExpectGPM: true,
		Log: `time="2026-01-01T00:00:00Z" level=info msg="GPU found" gpm=true gpu=0`})
	require.NoError(t, err)
	require.False(t, rep.Failed(), "findings: %v", rep.Findings)
	require.Equal(t, 2, rep.GPUs)
	require.Greater(t, rep.Series, 100)
	require.Equal(t, len(set.Fields), rep.Fields+countPrefix(set, "DCGM_EXP_"))
}

func countPrefix(set *counters.Set, prefix string) int {
	n := 0
	for _, f := range set.Fields {
		if strings.HasPrefix(f.Name, prefix) {
			n++
		}
	}
	return n
}

// setValue rewrites the value of the first sample line of a family for one GPU.
func setValue(body []byte, family, gpu, value string) []byte {
	re := regexp.MustCompile(`(?m)^(` + regexp.QuoteMeta(family) + `\{gpu="` + gpu + `"[^}]*\}) \S+$`)
	done := false
	return re.ReplaceAllFunc(body, func(line []byte) []byte {
		if done {
			return line
		}
		done = true
		return re.ReplaceAll(line, []byte("${1} "+value))
	})
}

// dropLines removes every sample line of a family for one GPU.
func dropLines(body []byte, family, gpu string) []byte {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(family) + `\{gpu="` + gpu + `"[^\n]*\n`)
	return re.ReplaceAll(body, nil)
}

func TestEachBrokenScrapeFailsNamingTheProblem(t *testing.T) {
	body, set := simScrape(t, 2)
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		in     func(*Input)
		want   string // in the failing finding
	}{
		{name: "GPM ratio above 1", mutate: func(b []byte) []byte { return setValue(b, "DCGM_FI_PROF_SM_ACTIVE", "1", "1.5") },
			want: `gpu="1"}: 1.5 is outside [0, 1] ratio`},
		{name: "source down", mutate: func(b []byte) []byte { return append(b, "gpuscope_source_up{source=\"nvml\"} 0\n"...) },
			want: "the source is not up"},
		{name: "power in milliwatts", mutate: func(b []byte) []byte { return setValue(b, "DCGM_FI_DEV_POWER_USAGE", "0", "350000") },
			want: "outside [0, 2000] W"},
		{name: "NaN value", mutate: func(b []byte) []byte { return setValue(b, "DCGM_FI_DEV_GPU_TEMP", "0", "NaN") },
			want: "is not finite"},
		{name: "field missing with no reason", mutate: func(b []byte) []byte { return dropLines(b, "DCGM_FI_DEV_MEM_CLOCK", "1") },
			want: `DCGM_FI_DEV_MEM_CLOCK{gpu="1"}: missing, and gpuscope_field_supported gives no reason`},
		{name: "profiling field unsupported on Hopper", mutate: func(b []byte) []byte {
			b = dropLines(b, "DCGM_FI_PROF_DRAM_ACTIVE", "0")
			return markUnsupported(b, "DCGM_FI_PROF_DRAM_ACTIVE", "0")
		}, want: "reported unsupported, but this GPU serves it through NVML"},
		{name: "FB used and free above total", mutate: func(b []byte) []byte { return setValue(b, "DCGM_FI_DEV_FB_USED", "0", "900000") },
			want: "exceed FB_TOTAL"},
		{name: "a GPU the driver lists is missing", in: func(in *Input) { in.GPUs = 3 },
			want: "the driver lists 3 GPUs, gpuscope exports 2"},
		{name: "GPU lost", mutate: func(b []byte) []byte { return setValue(b, "gpuscope_gpu_lost", "1", "1") },
			want: "GPU reported lost"},
		{name: "MIG enabled but no instance", in: func(in *Input) { in.ExpectMIG = true },
			want: "MIG is enabled, but no series carries GPU_I_ID"},
		{name: "XID path warned", in: func(in *Input) {
			in.Log = `time="2026-01-01T00:00:00Z" level=warning msg="cannot watch XID events on this GPU" gpu=0`
		}, want: "XID or MIG path: cannot watch XID events on this GPU"},
		{name: "error in a JSON log", in: func(in *Input) {
			in.Log = `{"level":"error","msg":"nvml: GetMigMode failed","time":"2026-01-01T00:00:00Z"}`
		}, want: "GetMigMode failed"},
		{name: "panic", in: func(in *Input) { in.Log = "panic: runtime error: index out of range" },
			want: "panic: runtime error"},
		{name: "GPM unavailable on Hopper", in: func(in *Input) {
			in.Log = `time="2026-01-01T00:00:00Z" level=info msg="GPU found" gpm=false gpu=0`
		}, want: "GPM is not supported on a GPU that should have it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), body...)
			if tc.mutate != nil {
				b = tc.mutate(b)
				require.NotEqual(t, string(body), string(b), "the mutation changed nothing")
			}
			in := Input{Exposition: b, Counters: set, GPUs: 2, ExpectGPM: true}
			if tc.in != nil {
				tc.in(&in)
			}
			rep, err := Check(in)
			require.NoError(t, err)
			require.True(t, rep.Failed(), "no failure for %s", tc.name)
			var msgs []string
			for _, f := range rep.Findings {
				if f.Fail {
					msgs = append(msgs, f.String())
				}
			}
			require.Contains(t, strings.Join(msgs, "\n"), tc.want)
		})
	}
}

func TestUnsupportedOptionalFieldWarnsWithoutFailing(t *testing.T) {
	body, set := simScrape(t, 2)
	b := dropLines(body, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "1")
	b = markUnsupported(b, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "1")
	rep, err := Check(Input{Exposition: b, Counters: set, GPUs: 2})
	require.NoError(t, err)
	require.False(t, rep.Failed(), "findings: %v", rep.Findings)
	require.Equal(t, 1, rep.Warnings(), "findings: %v", rep.Findings)
	require.Contains(t, warnings(rep), `WARN fields       DCGM_FI_PROF_PIPE_FP64_ACTIVE{gpu="1"}: not supported by this GPU`)
}

// An H100 has no fan: the driver reports the fan speed unsupported on every
// GPU of the node. That passes, without a warning a person would learn to
// skip, and says once which GPUs the fan alert cannot watch.
func TestFanlessGPUsPassWithOneNote(t *testing.T) {
	body, set := simScrape(t, 2) // the simulated H100, passively cooled
	require.Contains(t, string(body), `gpuscope_field_supported{field="DCGM_FI_DEV_FAN_SPEED",gpu="0"`)
	rep, err := Check(Input{Exposition: body, Counters: set, GPUs: 2, ExpectGPM: true})
	require.NoError(t, err)
	require.False(t, rep.Failed(), "findings: %v", rep.Findings)
	require.Zero(t, rep.Warnings(), "findings: %v", rep.Findings)
	require.Equal(t, 1, rep.Notes(), "findings: %v", rep.Findings)
	require.Equal(t, "NOTE fields       DCGM_FI_DEV_FAN_SPEED: not supported on GPU 0, 1 (a passively cooled GPU has no fan; GPUFanFailing cannot watch it)",
		rep.Findings[0].String())

	// A fan speed that is simply missing, with no reason from the GPU, is
	// still a failure: only the driver's word makes it absent by design.
	b := []byte(strings.ReplaceAll(string(body), `gpuscope_field_supported{field="DCGM_FI_DEV_FAN_SPEED",gpu="1"`, `gpuscope_dropped{field="DCGM_FI_DEV_FAN_SPEED",gpu="1"`))
	rep, err = Check(Input{Exposition: b, Counters: set, GPUs: 2, ExpectGPM: true})
	require.NoError(t, err)
	require.True(t, rep.Failed())
	require.Contains(t, failures(rep), `DCGM_FI_DEV_FAN_SPEED{gpu="1"}: missing, and gpuscope_field_supported gives no reason`)
}

func warnings(rep Report) string {
	return findings(rep, func(f Finding) bool { return !f.Fail && !f.Note })
}
func failures(rep Report) string { return findings(rep, func(f Finding) bool { return f.Fail }) }

func findings(rep Report, keep func(Finding) bool) string {
	var out []string
	for _, f := range rep.Findings {
		if keep(f) {
			out = append(out, f.String())
		}
	}
	return strings.Join(out, "\n")
}

// markUnsupported adds the series gpuscope writes for a field a GPU cannot
// serve; supported fields have none.
func markUnsupported(b []byte, field, gpu string) []byte {
	return append(b, fmt.Sprintf("gpuscope_field_supported{field=%q,gpu=%q,UUID=\"GPU-x\",reason=\"not supported\"} 0\n", field, gpu)...)
}

func TestUnparsableScrapeIsAnError(t *testing.T) {
	_, err := Check(Input{Exposition: []byte("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\" 35\n")})
	require.ErrorContains(t, err, "parse exposition")
}

// A label-type field the GPU does not support (the fabric's cluster UUID
// on a GPU that joins no NVLink fabric) warns as any unsupported field
// does; the same label missing without a reason fails.
func TestUnsupportedLabelFieldWarnsWithoutFailing(t *testing.T) {
	set, err := counters.Parse("labels.csv", strings.NewReader("DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_FABRIC_CLUSTER_UUID, label, u\n"))
	require.NoError(t, err)
	const temp = `DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-0a",pci_bus_id="00000000:83:00.0",device="nvidia0",modelName="NVIDIA L40S",Hostname="n"} 35` + "\n" +
		`gpuscope_gpu_lost{gpu="0",UUID="GPU-0a"} 0` + "\n"
	const reason = `gpuscope_field_supported{field="DCGM_FI_DEV_FABRIC_CLUSTER_UUID",gpu="0",UUID="GPU-0a",reason="GPU model joins no NVLink fabric"} 0` + "\n"
	for _, tc := range []struct {
		name, body string
		fails      bool
		want       string
	}{
		{"reported unsupported", temp + reason, false, `WARN fields       DCGM_FI_DEV_FABRIC_CLUSTER_UUID{gpu="0"}: not supported by this GPU`},
		{"missing without a reason", temp, true, `DCGM_FI_DEV_FABRIC_CLUSTER_UUID{gpu="0"}: label field missing or empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Check(Input{Exposition: []byte(tc.body), Counters: set, GPUs: 1})
			require.NoError(t, err)
			var msgs []string
			for _, f := range rep.Findings {
				msgs = append(msgs, f.String())
			}
			require.Equal(t, tc.fails, rep.Failed(), "findings: %v", msgs)
			require.Contains(t, strings.Join(msgs, "\n"), tc.want)
		})
	}
}
