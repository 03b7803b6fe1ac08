# Multi-stage build of gpuscope. The NVIDIA libraries (libnvidia-ml.so.1,
# libdcgm.so.4) are not in the image: the NVIDIA container runtime mounts the
# driver's, and DCGM comes from the node's nv-hostengine, a sidecar, or a
# DCGM base image for embedded mode.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
ENV CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"
RUN go build -trimpath \
      -ldflags "-s -w -X github.com/prometheus/common/version.Version=${VERSION} -X github.com/prometheus/common/version.Revision=${REVISION}" \
      -o /out/gpuscope ./cmd/gpuscope

# cgo and dlopen need glibc: distroless/base rather than static.
FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/gpuscope /usr/bin/gpuscope
COPY etc/default-counters.csv etc/dcp-metrics.csv /etc/gpuscope/
# Non-root works for NVML and for a remote host engine; embedded DCGM with
# profiling fields needs root and CAP_SYS_ADMIN, which the Helm chart grants
# only when those fields are enabled.
USER nonroot:nonroot
EXPOSE 9400
ENTRYPOINT ["/usr/bin/gpuscope"]
CMD ["--collectors=/etc/gpuscope/default-counters.csv"]
