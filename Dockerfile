# gpuscope images. Two targets:
#
#   runtime (the default, `make image`): NVIDIA's CUDA base image plus DCGM
#     (datacenter-gpu-manager-4-core, and -proprietary for the profiling
#     fields), like dcgm-exporter's image. go-dcgm loads libdcgm.so.4 even to
#     reach a remote nv-hostengine, so every DCGM mode of the chart (embedded,
#     node, sidecar) needs it; the image also carries nv-hostengine for the
#     sidecar mode.
#   nvml (`make image-nvml`): distroless, NVML only. The driver's
#     libnvidia-ml.so.1 comes from the NVIDIA container runtime.
#
# Build arguments pin what goes in: CUDA_VERSION and UBUNTU_VERSION choose the
# base image, DCGM_VERSION the DCGM packages (a version of NVIDIA's CUDA
# repository, for example 4.5.3-1), GO_VERSION the compiler.
#
# Both targets build for linux/amd64 and linux/arm64 (Grace):
#   docker buildx build --platform linux/amd64,linux/arm64 -t REPO:TAG --push .
# BuildKit sets TARGETARCH. The Go binary is cross-compiled on the build
# machine's own platform (BUILDPLATFORM) with a C cross compiler, since
# go-nvml and go-dcgm need cgo; only the runtime stages' package installs
# run under emulation when the platforms differ.
ARG CUDA_VERSION=13.2.1
ARG UBUNTU_VERSION=22.04
ARG GO_VERSION=1.26
ARG BASE_IMAGE=nvcr.io/nvidia/cuda:${CUDA_VERSION}-base-ubuntu${UBUNTU_VERSION}

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS go

# The DCGM image's binary is built on the runtime's own Ubuntu, so that it
# needs no newer glibc than the runtime has; Ubuntu's cross C library for
# the other architecture is the same glibc.
FROM --platform=$BUILDPLATFORM ${BASE_IMAGE} AS build
ARG TARGETARCH
ARG BUILDARCH
ENV DEBIAN_FRONTEND=noninteractive
RUN case "${TARGETARCH:-$BUILDARCH}" in \
      "$BUILDARCH") cross="" ;; \
      arm64) cross="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;; \
      amd64) cross="gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;; \
      *) echo "TARGETARCH=${TARGETARCH}: gpuscope builds for amd64 and arm64" >&2; exit 1 ;; \
    esac \
    && apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev git ca-certificates $cross \
    && rm -rf /var/lib/apt/lists/*
COPY --from=go /usr/local/go /usr/local/go
ENV PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
ENV CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"
RUN arch="${TARGETARCH:-$BUILDARCH}"; \
    case "$arch" in \
      "$BUILDARCH") cc=gcc ;; \
      arm64) cc=aarch64-linux-gnu-gcc ;; \
      amd64) cc=x86_64-linux-gnu-gcc ;; \
    esac; \
    GOOS=linux GOARCH="$arch" CC="$cc" go build -trimpath -tags urfave_cli_no_docs,testify_yaml_fail \
      -ldflags "-s -w -X github.com/prometheus/common/version.Version=${VERSION} -X github.com/prometheus/common/version.Revision=${REVISION}" \
      -o /out/ ./cmd/gpuscope ./cmd/gpuscope-client

# The distroless image's binary is built against Debian 12, its base.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build-nvml
ARG TARGETARCH
ARG BUILDARCH
RUN case "${TARGETARCH:-$BUILDARCH}" in \
      "$BUILDARCH") cross="" ;; \
      arm64) cross="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;; \
      amd64) cross="gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;; \
      *) echo "TARGETARCH=${TARGETARCH}: gpuscope builds for amd64 and arm64" >&2; exit 1 ;; \
    esac \
    && if [ -n "$cross" ]; then apt-get update && apt-get install -y --no-install-recommends $cross && rm -rf /var/lib/apt/lists/*; fi
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
ENV CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"
RUN arch="${TARGETARCH:-$BUILDARCH}"; \
    case "$arch" in \
      "$BUILDARCH") cc=gcc ;; \
      arm64) cc=aarch64-linux-gnu-gcc ;; \
      amd64) cc=x86_64-linux-gnu-gcc ;; \
    esac; \
    GOOS=linux GOARCH="$arch" CC="$cc" go build -trimpath -tags urfave_cli_no_docs,testify_yaml_fail \
      -ldflags "-s -w -X github.com/prometheus/common/version.Version=${VERSION} -X github.com/prometheus/common/version.Revision=${REVISION}" \
      -o /out/ ./cmd/gpuscope ./cmd/gpuscope-client

# cgo and dlopen need glibc: distroless/base rather than static.
FROM gcr.io/distroless/base-debian12:nonroot AS nvml
COPY --from=build-nvml /out/gpuscope /out/gpuscope-client /usr/bin/
COPY LICENSE /licenses/LICENSE
COPY etc/default-counters.csv etc/dcp-metrics.csv etc/nvidia-gpu-exporter.csv /etc/gpuscope/
COPY etc/dcgm-exporter/ /etc/dcgm-exporter/
USER 65532:65532
EXPOSE 9400
ENTRYPOINT ["/usr/bin/gpuscope", "--source=nvml"]
CMD ["--collectors=/etc/gpuscope/default-counters.csv"]

FROM ${BASE_IMAGE} AS runtime
ARG DCGM_VERSION=4.5.3-1
ARG VERSION=dev
LABEL org.opencontainers.image.title="gpuscope" \
      org.opencontainers.image.description="High-resolution GPU metrics from DCGM and NVML for Prometheus" \
      org.opencontainers.image.version="${VERSION}"
ARG TARGETARCH
ENV DEBIAN_FRONTEND=noninteractive
# DCGM comes from NVIDIA's CUDA repository, which the base image already
# trusts, in the directory of the image's architecture: x86_64 on amd64,
# sbsa (Arm servers: Grace) on arm64, where libdcgm.so.4 lands in
# /usr/lib/aarch64-linux-gnu. The package names are the same on both; a
# base image whose sources name the other directory is refused here rather
# than failing later with a missing package. The packages' epoch is 1.
RUN arch="${TARGETARCH:-$(dpkg --print-architecture)}"; \
    case "$arch" in \
      amd64) repo=x86_64 ;; \
      arm64) repo=sbsa ;; \
      *) echo "TARGETARCH=$arch: gpuscope's image is built for amd64 and arm64" >&2; exit 1 ;; \
    esac; \
    grep -rqsE "cuda/repos/[^/ ]+/$repo" /etc/apt/sources.list /etc/apt/sources.list.d/ \
      || { echo "the base image's apt sources name no NVIDIA CUDA repository for $repo (.../cuda/repos/<distro>/$repo)" >&2; exit 1; } \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
       datacenter-gpu-manager-4-core=1:${DCGM_VERSION} \
       datacenter-gpu-manager-4-proprietary=1:${DCGM_VERSION} \
       libstdc++6 \
    && rm -rf /var/lib/apt/lists/* /var/log/* \
    && ldconfig
RUN groupadd -r -g 1000 gpuscope && useradd -r -u 1000 -g gpuscope -s /usr/sbin/nologin gpuscope
COPY --from=build /out/gpuscope /out/gpuscope-client /usr/bin/
COPY LICENSE /licenses/LICENSE
COPY etc/default-counters.csv etc/dcp-metrics.csv etc/nvidia-gpu-exporter.csv /etc/gpuscope/
# dcgm-exporter deployments pass these paths to -f; they hold
# dcgm-exporter's own files, unchanged, so the field set stays the same.
COPY etc/dcgm-exporter/ /etc/dcgm-exporter/
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility NVIDIA_VISIBLE_DEVICES=all NVIDIA_DISABLE_REQUIRE=true
# Non-root by default: NVML, a remote or node host engine (dcgm.mode=node or
# sidecar) and embedded DCGM without profiling fields work as user 1000.
# Root is needed, and the chart runs the container as root only then, for
# the profiling fields (DCGM_FI_PROF_*: root plus CAP_SYS_ADMIN, as in
# dcgm-exporter's image notes) and for nv-hostengine in the sidecar
# container.
USER 1000:1000
EXPOSE 9400
ENTRYPOINT ["/usr/bin/gpuscope"]
CMD ["--collectors=/etc/gpuscope/default-counters.csv"]
