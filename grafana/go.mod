module github.com/gpuscope/gpuscope/grafana

go 1.26.8

require (
	github.com/grafana/grafana-foundation-sdk/go v0.0.22 // indirect
	github.com/sirupsen/logrus v1.10.2 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.13.0 // indirect
)
