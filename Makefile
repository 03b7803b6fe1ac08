# gpuscope: build, run, test, benchmark, release.

GO        ?= go
# The version comes from the git tag vX.Y.Z (scripts/version.sh): X.Y.Z at
# the tag, X.Y.Z-N-gHASH after it, -dirty with uncommitted changes.
VERSION   ?= $(shell scripts/version.sh)
REVISION  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
# SOURCE_DATE_EPOCH (scripts/release.sh sets the commit's time) makes the
# build date, and so the binary, the same on every build of one commit.
BUILD_DATE := $(shell date -u -d @$${SOURCE_DATE_EPOCH:-$$(date +%s)} +%Y%m%d-%H:%M:%S)
VPKG      := github.com/prometheus/common/version
LDFLAGS   := -s -w -X $(VPKG).Version=$(VERSION) -X $(VPKG).Revision=$(REVISION) -X $(VPKG).Branch=$(BRANCH) \
             -X $(VPKG).BuildUser=gpuscope -X $(VPKG).BuildDate=$(BUILD_DATE)
# Build tags that leave out code gpuscope never runs: urfave/cli's man page
# and Markdown generators (a Markdown parser), and testify's YAML support,
# which go-dcgm links in through its test helpers.
TAGS      := urfave_cli_no_docs,testify_yaml_fail
# The compile flags of every build of the module's packages: make build and
# make release, and in make test the vet runs and the binaries the tests
# build (`make buildflags` prints them), so that on a cold Go build cache
# each package compiles once for all of them.
BUILDFLAGS := -trimpath -tags $(TAGS)
# go-nvml's headers use deprecated declarations on purpose; silence them.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_ENABLED = 1

# Target platform: linux on this machine's architecture unless GOARCH says
# otherwise. go-nvml and go-dcgm need cgo, so a build for another
# architecture needs that architecture's C cross compiler: Debian's
# gcc-aarch64-linux-gnu for arm64 (scripts/install-test-deps.sh installs
# it), gcc-x86-64-linux-gnu for amd64. CC=... overrides the choice.
HOSTARCH  := $(shell $(GO) env GOHOSTARCH)
GOOS      ?= linux
GOARCH    ?= $(HOSTARCH)
CROSS_CC_arm64 := aarch64-linux-gnu-gcc
CROSS_CC_amd64 := x86_64-linux-gnu-gcc
ifeq ($(GOARCH),$(HOSTARCH))
BIN       ?= bin/gpuscope
BUILD_ENV := GOOS=$(GOOS) GOARCH=$(GOARCH)
else
BIN       ?= bin/gpuscope-$(GOOS)-$(GOARCH)
ifeq ($(origin CC),default)
CC        := $(CROSS_CC_$(GOARCH))
endif
BUILD_ENV := GOOS=$(GOOS) GOARCH=$(GOARCH) CC=$(CC)
endif

# Images (need a Docker engine with BuildKit; none is used by the tests).
IMAGE        ?= gpuscope
DOCKER       ?= docker
DCGM_VERSION ?= 4.5.3-1
CUDA_VERSION ?= 13.2.1
IMAGE_ARGS   := --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) \
                --build-arg DCGM_VERSION=$(DCGM_VERSION) --build-arg CUDA_VERSION=$(CUDA_VERSION)

.PHONY: build buildflags run test bench fuzz fleet lint generate clean image image-multiarch image-nvml release gpu-check-bundle

# gpuscope-client (top, capture) goes beside the exporter, where
# `gpuscope top` and `gpuscope capture` look for it.
build:
	@if [ -z "$(CC)" ]; then echo "make build: no C cross compiler is known for GOARCH=$(GOARCH); set CC=..." >&2; exit 1; fi
	@if [ "$(GOARCH)" != "$(HOSTARCH)" ] && ! command -v "$(firstword $(CC))" >/dev/null; then \
		echo "make build: $(CC), the C cross compiler for GOARCH=$(GOARCH), is not installed (scripts/install-test-deps.sh installs it on Debian)" >&2; exit 1; fi
	$(BUILD_ENV) $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/gpuscope
	$(BUILD_ENV) $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o $(dir $(BIN))gpuscope-client ./cmd/gpuscope-client

buildflags:
	@echo $(BUILDFLAGS)

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

# staticcheck's checks and the one turned off are in staticcheck.conf.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@sc=$$(scripts/build-staticcheck.sh | tail -n1) && for m in . grafana deploy/helm/test; do (cd $$m && $$sc -tags $(TAGS) ./...) || exit 1; done

generate:
	cd counters && $(GO) generate ./...

# The default image: CUDA base with DCGM, for every DCGM mode of the chart.
image:
	$(DOCKER) build $(IMAGE_ARGS) --target runtime -t $(IMAGE):$(VERSION) .

# The default image for linux/amd64 and linux/arm64 under one tag (a
# manifest list). buildx pushes it: a multi-platform image cannot be loaded
# into the classic image store. IMAGE names the registry's repository.
PLATFORMS ?= linux/amd64,linux/arm64
image-multiarch:
	$(DOCKER) buildx build --platform $(PLATFORMS) $(IMAGE_ARGS) --target runtime -t $(IMAGE):$(VERSION) --push .

# NVML only, distroless: no DCGM, so --source=nvml.
image-nvml:
	$(DOCKER) build $(IMAGE_ARGS) --target nvml -t $(IMAGE):$(VERSION)-nvml .

# Release archives for linux/amd64 and linux/arm64, their SBOMs and
# SHA256SUMS, into DIST (dist/). See docs/releasing.md.
DIST ?= dist
release:
	VERSION=$(VERSION) DIST=$(DIST) GO=$(GO) scripts/release.sh

# The GPU check (scripts/gpu-check.sh) for a GPU machine without Go or a
# network: the script, its binaries and the counters files it runs, as a
# folder and a tarball. Copy the tarball over, unpack it and run
# scripts/gpu-check.sh inside; it says which glibc the binaries need
# against the host's, so build it on a machine no newer than the target.
GPU_CHECK_BUNDLE ?= dist/gpu-check-$(GOOS)-$(GOARCH)
gpu-check-bundle:
	rm -rf $(GPU_CHECK_BUNDLE) $(GPU_CHECK_BUNDLE).tar.gz
	mkdir -p $(GPU_CHECK_BUNDLE)/bin $(GPU_CHECK_BUNDLE)/scripts $(GPU_CHECK_BUNDLE)/etc
	$(BUILD_ENV) $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o $(GPU_CHECK_BUNDLE)/bin/ ./cmd/gpuscope ./cmd/gpuscope-gpucheck ./cmd/gpuscope-cudaload
	cp scripts/gpu-check.sh $(GPU_CHECK_BUNDLE)/scripts/
	cp etc/default-counters.csv etc/dcp-metrics.csv $(GPU_CHECK_BUNDLE)/etc/
	tar -C $(dir $(GPU_CHECK_BUNDLE)) -czf $(GPU_CHECK_BUNDLE).tar.gz $(notdir $(GPU_CHECK_BUNDLE))
	@echo "$(GPU_CHECK_BUNDLE).tar.gz: unpack on the GPU machine and run $(notdir $(GPU_CHECK_BUNDLE))/scripts/gpu-check.sh"

clean:
	rm -rf bin dist
