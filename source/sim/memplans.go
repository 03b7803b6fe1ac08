package sim

import "fmt"

// The plans of the memory scenarios (memwork.go has their works).

func planOOMLoop(b *builder) {
	b.node("h100", 4)
	b.background()
	b.gpus[2].owner = &podFinetune
	b.gpus[2].w = &oomLoop{j: newJob(b.seed, 8500), topMiB: b.usable(), load: 60, climb: 8 * 60, backoff: 2 * 60}
}

func planMemoryRunsOut(b *builder) {
	b.node("h100", 4)
	b.background()
	b.gpus[2].owner = &podFinetune
	b.gpus[2].w = &growingNeed{j: newJob(b.seed, 8600), fromMiB: 0.6 * b.usable(), toMiB: b.usable(),
		growFrom: 10 * 60, growUntil: 170 * 60}
}

func planPreallocatedInference(b *builder) {
	b.node("h100", 4)
	for i := range b.gpus {
		pod := podServe
		pod.Pod = fmt.Sprintf("vllm-chat-%d", i)
		b.gpus[i].owner = &pod
		b.gpus[i].w = &serving{k: newKindJob(MemoryBound, b.seed, uint64(8700+i), 0), mib: (0.9 + 0.005*float64(i)) * b.usable()}
	}
}

func planSteadyFullTraining(b *builder) {
	b.node("h100", 4)
	j := newJob(b.seed, 8800)
	for i := range b.gpus {
		b.gpus[i].owner = &podTrain
		b.gpus[i].w = &steadyFull{training: training{j: j, mib: 0.93 * b.usable()}, lowMiB: 0.93 * b.usable(), highMiB: 0.95 * b.usable()}
	}
}

func planWarmupFill(b *builder) {
	b.node("h100", 4)
	b.background()
	b.gpus[2].owner = &podServe
	b.gpus[2].w = &warmingUp{serving: serving{k: newKindJob(MemoryBound, b.seed, 8900, 0), mib: 0.91 * b.usable()},
		start: 20 * 60, fill: 5 * 60}
}

func planEvaluationPause(b *builder) {
	b.node("h100", 4)
	j := newJob(b.seed, 9000)
	for i := range b.gpus {
		b.gpus[i].owner = &podTrain
		b.gpus[i].w = &pausing{training: training{j: j, mib: 0.82 * b.usable()}, every: 60 * 60, dur: 20 * 60}
	}
}

// planBareMetalCheckpoint holds no GPU for a pod or a job: the node labels
// no workload, as on bare metal.
func planBareMetalCheckpoint(b *builder) {
	b.node("h100", 4)
	j := newJob(b.seed, 9100)
	for i := range b.gpus {
		b.gpus[i].w = &training{j: j, mib: 0.82 * b.usable(), ckptEvery: 45 * 60, ckptDur: 10 * 60}
	}
}
