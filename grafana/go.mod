module github.com/gpuscope/gpuscope/grafana

go 1.26.8

require (
	github.com/grafana/grafana-foundation-sdk/go v0.0.22
	github.com/sirupsen/logrus v1.10.2
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.5
)

require golang.org/x/sys v0.13.0 // indirect
