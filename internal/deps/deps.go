package deps

import (
	_ "github.com/NVIDIA/go-dcgm/pkg/dcgm"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/collectors"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/prometheus/common/version"
	_ "github.com/prometheus/exporter-toolkit/web"
	_ "github.com/prometheus/exporter-toolkit/web/kingpinflag"
	_ "github.com/sirupsen/logrus"
	_ "github.com/stretchr/testify/require"
	_ "github.com/urfave/cli/v2"
	_ "google.golang.org/grpc"
	_ "k8s.io/kubelet/pkg/apis/podresources/v1"
)

