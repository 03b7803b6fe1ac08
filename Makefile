# gpuscope: build, run, test, benchmark.

GO        ?= go
BIN       ?= bin/gpuscope
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
VPKG      := github.com/prometheus/common/version
LDFLAGS   := -s -w -X $(VPKG).Version=$(VERSION) -X $(VPKG).Revision=$(REVISION) -X $(VPKG).Branch=$(BRANCH) \
             -X $(VPKG).BuildUser=gpuscope -X $(VPKG).BuildDate=$(shell date -u +%Y%m%d-%H:%M:%S)
# go-nvml's headers use deprecated declarations on purpose; silence them.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_ENABLED = 1

# Images (need a Docker engine with BuildKit; none is used by the tests).
IMAGE        ?= gpuscope
DOCKER       ?= docker
DCGM_VERSION ?= 4.5.3-1
CUDA_VERSION ?= 13.2.1
IMAGE_ARGS   := --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) \
                --build-arg DCGM_VERSION=$(DCGM_VERSION) --build-arg CUDA_VERSION=$(CUDA_VERSION)

.PHONY: build run test bench fuzz fleet lint generate clean image image-nvml

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/gpuscope

# Simulated node of 8 x H100 with pod labels, mixed workloads and workload
# insight; no GPU needed.
run: build
	$(BIN) --source=sim --sim-pods --collectors=etc/dcp-metrics.csv --insight

test:
	scripts/test.sh

bench:
	scripts/bench.sh

# Each fuzz target for FUZZTIME (default 30s); their seeds run in make test.
fuzz:
	scripts/fuzz.sh

# A simulated fleet (100 nodes x 8 GPUs, 10 minutes) on Prometheus and
# Thanos; builds Thanos the first time (cached). See docs/scale.md.
fleet:
	scripts/fleet.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

generate:
	cd counters && $(GO) generate ./...

# The default image: CUDA base with DCGM, for every DCGM mode of the chart.
image:
	$(DOCKER) build $(IMAGE_ARGS) --target runtime -t $(IMAGE):$(VERSION) .

# NVML only, distroless: no DCGM, so --source=nvml.
image-nvml:
	$(DOCKER) build $(IMAGE_ARGS) --target nvml -t $(IMAGE):$(VERSION)-nvml .

clean:
	rm -rf bin
