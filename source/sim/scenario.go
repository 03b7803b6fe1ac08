package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// Scenario is a named simulated node that shows one everyday trouble of a
// GPU cluster, or a healthy control that must raise no alert. Everything in
// it follows from the seed and the time since the node started, so a
// scenario replays the same way on the manual clock.
type Scenario struct {
	Name string
	// Summary says what the node does, in one sentence.
	Summary string
	// Control is a healthy node: no alert should fire on it.
	Control bool
	// Nodes is how many nodes the scenario spans, for a job across nodes
	// (0 means 1). Each node runs as a gpuscope of its own, named
	// NAME/INDEX (ScenarioByName); NAME alone is node 0.
	Nodes int
	// host is the node of a scenario across nodes that this one lays out.
	host int
	plan func(b *builder)
}

// Owner holds a GPU, or one of its MIG instances, in a scenario: a pod, or
// an HPC job outside Kubernetes.
type Owner struct {
	GPU int
	// GPUInstanceID is the MIG instance held; -1 for the whole GPU.
	GPUInstanceID             int
	Namespace, Pod, Container string
	Job                       string
}

// The pods and jobs of the scenarios.
var (
	podTrain    = Owner{Namespace: "ml-training", Pod: "llama-train-0", Container: "trainer"}
	podNotebook = Owner{Namespace: "research", Pod: "notebook-7f9c", Container: "jupyter"}
	podServe    = Owner{Namespace: "serving", Pod: "vllm-chat-0", Container: "server"}
	podFinetune = Owner{Namespace: "ml-training", Pod: "finetune-3", Container: "trainer"}
)

// Scenarios lists every scenario, troubles first, then the controls.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "idle-pod", Summary: "a notebook pod holds 60 GiB of an H100 and runs nothing, for hours", plan: planIdlePod},
		{Name: "zombie", Summary: "a process no pod owns holds 20 GiB of a GPU and runs nothing", plan: planZombie},
		{Name: "leak", Summary: "an inference server's memory grows by 2.4 GiB an hour, handing a little back every ten minutes or so", plan: planLeak},
		{Name: "fan-stopped", Summary: "the fan of one air-cooled card stops after 40 minutes; at the same power its temperature climbs by over 20 °C, to the mid-70s °C, and stays there", plan: planFanStopped},
		{Name: "ecc-rising", Summary: "one GPU starts counting corrected ECC errors after 40 minutes, faster and faster", plan: planECCRising},
		{Name: "collective-hang", Summary: "a 4-GPU training job's collective hangs after 90 minutes: GPU_UTIL stays at 100 while SM, tensor and NVLink activity and power fall flat", plan: planCollectiveHang},
		{Name: "mig-idle", Summary: "a pod holds an H100 MIG instance (2g.20gb) with 12 GiB of memory and runs nothing; the other instances and the GPU beside it, not in MIG mode, work", plan: planMIGIdle},
		{Name: "slurm-idle", Summary: "an HPC job, no pod, holds a GPU with a CUDA context and runs nothing", plan: planSlurmIdle},
		{Name: "power-imbalance", Summary: "one GPU of a 4-GPU data-parallel job, its clocks locked low, draws about 60% of its peers' power for the same work", plan: planPowerImbalance},
		{Name: "overload", Summary: "a serving GPU's load grows from its usual level to flat out over an hour, its batch and KV cache growing, and stays saturated", plan: planOverload},
		{Name: "fabric-degraded", Summary: "one GPU of a 4-GPU training job on an HGX baseboard loses NVLink fabric bandwidth after 40 minutes: its fabric health mask says degraded bandwidth and its summary limited capacity, while the job trains on", plan: planFabricDegraded},
		{Name: "oom-loop", Summary: "a fine-tuning job's memory climbs to the top of the GPU in 8 minutes, the next allocation fails, the process dies and the pod restarts it 2 minutes later, again and again", plan: planOOMLoop},
		{Name: "memory-runs-out", Summary: "a training job's sequence-length warm-up makes each step longer and its memory climb with the work, from 60% of the GPU to all of it over 160 minutes", plan: planMemoryRunsOut},
		{Name: "pcie-x8", Summary: "GPU 2 of a node trains with its PCIe link at x8 of its x16: a riser lost half its lanes", plan: planPCIeX8},
		{Name: "pcie-gen-low", Summary: "GPU 2 of a node trains with its PCIe link at generation 3 of its 5: a riser that cannot hold the speed", plan: planPCIeGenLow},
		{Name: "multinode-straggler", Summary: "a data-parallel job of one H100 per pod on four nodes; the GPU of node 2, its SM clock locked low, draws about 65% of the others' power for the same work, and every step waits for it", Nodes: 4, plan: planMultinodeStraggler},
		{Name: "multinode-power-capped", Summary: "a PyTorchJob of three pods of four H100s, one pod per node; every GPU of node 1 is held to about 60% of the others' power for the same work, so the pod looks even on its own", Nodes: 3, plan: planMultinodePowerCapped},
		{Name: "healthy-training", Summary: "a 4-GPU data-parallel training job steps along", Control: true, plan: planHealthyTraining},
		{Name: "checkpoint", Summary: "a training job pauses for a 4-minute checkpoint every 45 minutes", Control: true, plan: planCheckpoint},
		{Name: "model-loading", Summary: "a training job spends its first 8 minutes loading its weights, then trains", Control: true, plan: planModelLoading},
		{Name: "bursty-inference", Summary: "inference servers with 85% of their memory preallocated serve bursts of requests, idle between them and for 10 minutes every 40", Control: true, plan: planBurstyInference},
		{Name: "free-idle", Summary: "no pod holds the GPUs; nothing runs", Control: true, plan: planFreeIdle},
		{Name: "preallocated-inference", Summary: "vLLM servers at gpu_memory_utilization 0.9 hold 90-92% of their GPUs' memory, flat, and serve", Control: true, plan: planPreallocatedInference},
		{Name: "steady-full-training", Summary: "a 4-GPU training job keeps 93-95% of each GPU's memory, its allocator trimming and growing its pool by a little as batch shapes vary", Control: true, plan: planSteadyFullTraining},
		{Name: "warmup-fill", Summary: "a model server starts after 20 minutes and fills 91% of its GPU's memory in 5 minutes as it loads and warms up, then serves", Control: true, plan: planWarmupFill},
		{Name: "evaluation-pause", Summary: "a training job stops for 20 minutes every hour while its evaluation runs elsewhere, its memory held", Control: true, plan: planEvaluationPause},
		{Name: "bare-metal-checkpoint", Summary: "a training job on a node that labels no workload pauses for a 10-minute checkpoint every 45 minutes, its memory held", Control: true, plan: planBareMetalCheckpoint},
		{Name: "gpu-reset", Summary: "a single-GPU job ends, its GPU is reset (volatile ECC counts back to zero) and the job starts again from its checkpoint", Control: true, plan: planGPUReset},
		{Name: "multinode-healthy", Summary: "a PyTorchJob of three pods of four H100s, one pod per node, trains in step; its GPUs spread by up to 16% in power, as GPUs of one model do", Control: true, Nodes: 3, plan: planMultinodeHealthy},
		{Name: "consumer-idle", Summary: "a workstation of two GeForce RTX 4080 SUPER cards: one idle, its PCIe link at generation 1 of 4 as GeForce cards rest, the other training at generation 4", Control: true, plan: planConsumerIdle},
	}
}

// ScenarioNames lists the names of Scenarios, in order.
func ScenarioNames() []string {
	var out []string
	for _, s := range Scenarios() {
		out = append(out, s.Name)
	}
	return out
}

// ScenarioByName finds a scenario; the error lists the names. A scenario
// across nodes takes the node as NAME/INDEX (0-based); NAME alone is node
// 0. The scenario returned carries the name as given.
func ScenarioByName(name string) (Scenario, error) {
	name = strings.TrimSpace(name)
	base, idx, hasNode := strings.Cut(name, "/")
	for _, s := range Scenarios() {
		if s.Name != base {
			continue
		}
		if !hasNode {
			return s, nil
		}
		n, err := strconv.Atoi(idx)
		if err != nil || n < 0 || n >= s.NodeCount() {
			return Scenario{}, fmt.Errorf("scenario %q: node %q: %s spans %d node(s), numbered 0 to %d", name, idx, base, s.NodeCount(), s.NodeCount()-1)
		}
		s.Name, s.host = name, n
		return s, nil
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q; use one of %s", name, strings.Join(ScenarioNames(), ", "))
}

// NodeCount is how many nodes the scenario spans.
func (sc Scenario) NodeCount() int { return max(1, sc.Nodes) }

// Host is the node of the scenario this one lays out, 0 to NodeCount-1.
func (sc Scenario) Host() int { return sc.host }

// build lays out the scenario's node.
func (sc Scenario) build(seed uint64) *builder {
	b := newBuilder(seed)
	b.host = sc.host
	sc.plan(b)
	return b
}

// Owners lists who holds which GPU or MIG instance; GPUs nobody holds are
// left out.
func (sc Scenario) Owners() []Owner {
	b := sc.build(0)
	var out []Owner
	for i, g := range b.gpus {
		if g.owner != nil {
			o := *g.owner
			o.GPU, o.GPUInstanceID = i, -1
			out = append(out, o)
		}
		for k, in := range g.instances {
			if in.owner != nil {
				o := *in.owner
				o.GPU, o.GPUInstanceID = i, k+1
				out = append(out, o)
			}
		}
	}
	return out
}

// GPUs is how many GPUs the scenario's node has.
func (sc Scenario) GPUs() int {
	b := sc.build(0)
	return len(b.gpus)
}

// builder is the node a scenario lays out: its model, MIG layout and what
// each GPU does.
type builder struct {
	seed  uint64
	model string
	mig   string
	gpus  []*gpuPlan
	// host is the node of a scenario across nodes being laid out.
	host int
}

// gpuPlan is one GPU's part in a scenario.
type gpuPlan struct {
	owner *Owner
	// w is what runs on the GPU; nil runs nothing (no process).
	w work
	// orphan is a process outside every pod and job (a zombie).
	orphan    bool
	instances []instPlan
	// powerScale scales the power the GPU draws above idle (0 means 1);
	// smClock, when set, is where its SM clock is locked.
	powerScale, smClock float64
	// fanStopsAt, when set, is when the card's fan stops.
	fanStopsAt float64
	// sbePerHour is the rate of corrected ECC errors at tsec; nil is none.
	sbePerHour func(tsec float64) float64
	// resetAt, when set, is when the GPU is reset: its volatile ECC
	// counts go back to zero.
	resetAt float64
	// fabricDegradedAt, when set, is when the GPU's NVLink fabric loses
	// bandwidth.
	fabricDegradedAt float64
	// pcieLanes, when set, is the width its PCIe link trained at, below
	// the model's: a riser or a seat that lost lanes. pcieGen, when set,
	// is the generation it trained at, below the model's: a riser or a
	// cable that cannot hold the speed.
	pcieLanes, pcieGen int
}

// instPlan is one MIG instance's part.
type instPlan struct {
	owner *Owner
	w     work
}

func newBuilder(seed uint64) *builder { return &builder{seed: seed, model: "h100"} }

// node sets the model and the number of GPUs, all running nothing yet.
func (b *builder) node(model string, n int) {
	b.model = model
	b.gpus = make([]*gpuPlan, n)
	for i := range b.gpus {
		b.gpus[i] = &gpuPlan{}
	}
}

// usable is the model's framebuffer applications can use, MiB.
func (b *builder) usable() float64 {
	m := models[b.model]
	return float64(m.fbTotal - m.fbReserved)
}

// train puts one data-parallel job of the pod on the GPUs, each holding
// memFrac of its memory; the GPUs step together.
func (b *builder) train(pod Owner, key uint64, memFrac float64, gpus ...int) {
	j := newJob(b.seed, key)
	for _, i := range gpus {
		b.gpus[i].owner = &pod
		b.gpus[i].w = &training{j: j, mib: memFrac * b.usable()}
	}
}

// trainings returns the training works of the GPUs, for a scenario to
// change.
func (b *builder) trainings(gpus ...int) []*training {
	var out []*training
	for _, i := range gpus {
		out = append(out, b.gpus[i].w.(*training))
	}
	return out
}

// background is the healthy training pod most scenarios run on GPUs 0 and
// 1, beside what they show.
func (b *builder) background() { b.train(podTrain, 7000, 0.82, 0, 1) }

func planIdlePod(b *builder) {
	b.node("h100", 4)
	b.background()
	b.gpus[2].owner = &podNotebook
	b.gpus[2].w = held{mib: 60 * 1024}
}

func planZombie(b *builder) {
	b.node("h100", 4)
	b.background()
	b.gpus[2].w, b.gpus[2].orphan = held{mib: 20 * 1024}, true
}

func planLeak(b *builder) {
	b.node("h100", 4)
	b.background()
	b.gpus[2].owner = &podServe
	b.gpus[2].w = &leaking{serving: serving{k: newKindJob(MemoryBound, b.seed, 7100, 0), mib: 30 * 1024},
		growMiB: 60, freeMiB: 200, freeEvery: 600, seed: b.seed, key: 7101}
}

func planFanStopped(b *builder) {
	b.node("rtx6000ada", 4)
	b.train(podTrain, 7200, 0.8, 0, 1, 2, 3)
	b.gpus[1].fanStopsAt = 40 * 60
}

func planECCRising(b *builder) {
	b.node("h100", 4)
	b.train(podTrain, 7300, 0.82, 0, 1, 2, 3)
	const from = 40 * 60
	b.gpus[2].sbePerHour = func(tsec float64) float64 {
		// Climbing by 40 errors an hour every hour.
		return max(0, 40*(tsec-from)/3600)
	}
}

func planCollectiveHang(b *builder) {
	b.node("h100", 4)
	b.train(podTrain, 7400, 0.82, 0, 1, 2, 3)
	for _, w := range b.trainings(0, 1, 2, 3) {
		w.hangAt = 90 * 60
	}
}

func planMIGIdle(b *builder) {
	b.node("h100", 2)
	b.mig = "3g.40gb,2x2g.20gb"
	// GPU 1 runs without MIG, as on a node of the GPU operator's mixed
	// strategy.
	b.train(podTrain, 7502, 0.82, 1)
	inst := func(owner Owner, w work) instPlan { return instPlan{owner: &owner, w: w} }
	trainOn := func(pod string, key uint64, mib float64) instPlan {
		return inst(Owner{Namespace: "ml-training", Pod: pod, Container: "trainer"}, &training{j: newJob(b.seed, key), mib: mib})
	}
	serveOn := func(pod string, key uint64, mib float64) instPlan {
		return inst(Owner{Namespace: "serving", Pod: pod, Container: "server"}, &serving{k: newKindJob(MemoryBound, b.seed, key, 0), mib: mib})
	}
	b.gpus[0].instances = []instPlan{
		trainOn("bert-train-0", 7500, 32*1024),
		inst(podNotebook, held{mib: 12 * 1024}),
		serveOn("vllm-small-0", 7501, 16*1024),
	}
}

func planSlurmIdle(b *builder) {
	b.node("h100", 4)
	b.train(Owner{Job: "4242"}, 7600, 0.82, 0, 1)
	b.gpus[2].owner = &Owner{Job: "4243"}
	b.gpus[2].w = held{mib: contextMiB}
}

func planPowerImbalance(b *builder) {
	b.node("h100", 4)
	b.train(podTrain, 7700, 0.82, 0, 1, 2, 3)
	b.gpus[2].powerScale, b.gpus[2].smClock = 0.6, 1410
}

func planOverload(b *builder) {
	b.node("h100", 4)
	b.background()
	b.gpus[2].owner = &podServe
	b.gpus[2].w = &saturating{k: newKindJob(MemoryBound, b.seed, 7800, 0), mib: 0.55 * b.usable(), peakMiB: 0.85 * b.usable(),
		growFrom: 30 * 60, fullAt: 90 * 60}
}

func planFabricDegraded(b *builder) {
	b.node("h100", 4)
	b.train(podTrain, 8400, 0.82, 0, 1, 2, 3)
	b.gpus[2].fabricDegradedAt = 40 * 60
}

func planHealthyTraining(b *builder) {
	b.node("h100", 4)
	b.train(podTrain, 7900, 0.82, 0, 1, 2, 3)
}

func planCheckpoint(b *builder) {
	b.node("h100", 4)
	b.train(podTrain, 8000, 0.82, 0, 1, 2, 3)
	for _, w := range b.trainings(0, 1, 2, 3) {
		w.ckptEvery, w.ckptDur = 45*60, 4*60
	}
}

func planModelLoading(b *builder) {
	b.node("h100", 4)
	b.train(podTrain, 8100, 0.82, 0, 1, 2, 3)
	for _, w := range b.trainings(0, 1, 2, 3) {
		w.j.initDur = 8 * 60
	}
}

func planBurstyInference(b *builder) {
	b.node("h100", 4)
	for i := range b.gpus {
		pod := podServe
		pod.Pod = fmt.Sprintf("vllm-chat-%d", i)
		b.gpus[i].owner = &pod
		b.gpus[i].w = &bursty{mib: 0.85 * b.usable(), busyMin: 2, busyMax: 8, slot: 20,
			lullEvery: 40 * 60, lull: 10 * 60, seed: b.seed, key: uint64(8200 + i)}
	}
}

func planFreeIdle(b *builder) { b.node("h100", 4) }

func planGPUReset(b *builder) {
	b.node("h100", 4)
	b.background()
	const stop, reset, restart = 60 * 60, 62 * 60, 64 * 60
	first := training{j: newJob(b.seed, 8300), mib: 0.8 * b.usable()}
	again := first
	again.start = restart
	b.gpus[2].owner = &podFinetune
	b.gpus[2].w = &restarting{first: first, again: again, stopAt: stop, resetAt: reset, restartAt: restart}
	b.gpus[2].resetAt = reset
	// A few corrected errors before the reset, which the reset clears.
	b.gpus[2].sbePerHour = func(float64) float64 { return 3 }
}

func planPCIeX8(b *builder) {
	b.node("h100", 4)
	b.background()
	b.train(podFinetune, 8500, 0.8, 2)
	b.gpus[2].pcieLanes = 8
}

func planPCIeGenLow(b *builder) {
	b.node("h100", 4)
	b.background()
	b.train(podFinetune, 8550, 0.8, 2)
	b.gpus[2].pcieGen = 3
}

// A job across nodes: the pod of each node is the job's rank there, named
// as its operator names it, so that the workload the rules derive from the
// pod names is the same job on every node.
func multinodePod(job string, host int) Owner {
	return Owner{Namespace: "ml-training", Pod: fmt.Sprintf("%s-worker-%d", job, host), Container: "trainer"}
}

// spreadPower gives each GPU of a job the few percent of power by which GPUs
// of one model differ at the same work (silicon, temperature, airflow):
// 0.92 to 1.08 of the model's draw, fixed per node and GPU.
func (b *builder) spreadPower(gpus ...int) {
	for _, i := range gpus {
		b.gpus[i].powerScale = 0.92 + 0.16*fraction(hash4(b.seed, uint64(b.host), tagScenario, uint64(i)))
	}
}

func planMultinodeStraggler(b *builder) {
	b.node("h100", 1)
	// The same job key on every node: the ranks step together.
	b.train(multinodePod("bert-ddp", b.host), 8600, 0.8, 0)
	b.spreadPower(0)
	if b.host == 2 {
		b.gpus[0].powerScale, b.gpus[0].smClock = 0.6, 1410
	}
}

func planMultinodePowerCapped(b *builder) {
	b.node("h100", 4)
	b.train(multinodePod("pt-llama", b.host), 8700, 0.82, 0, 1, 2, 3)
	b.spreadPower(0, 1, 2, 3)
	if b.host == 1 {
		for _, g := range b.gpus {
			g.powerScale, g.smClock = 0.6, 1410
		}
	}
}

func planMultinodeHealthy(b *builder) {
	b.node("h100", 4)
	b.train(multinodePod("pt-llama", b.host), 8800, 0.82, 0, 1, 2, 3)
	b.spreadPower(0, 1, 2, 3)
}

func planConsumerIdle(b *builder) {
	b.node("rtx4080super", 2)
	b.train(Owner{Namespace: "research", Pod: "sd-finetune-0", Container: "trainer"}, 8900, 0.8, 1)
}
