// Command gen writes gpuscope's dashboards as JSON under dashboards/ and as
// a ConfigMap for Grafana's dashboard sidecar. Run it from the grafana/
// module: go run ./gen
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/grafana/dash"
)

func main() {
	dir := flag.String("dir", ".", "the grafana/ directory to write dashboards/ and dashboards-configmap.yaml into")
	flag.Parse()
	if err := run(*dir); err != nil {
		logrus.WithError(err).Fatal("generating dashboards")
	}
}

func run(dir string) error {
	files, err := dash.Files()
	if err != nil {
		return err
	}
	out := filepath.Join(dir, "dashboards")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	for name, b := range files {
		p := filepath.Join(out, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
		logrus.WithField("file", p).Info("dashboard written")
	}
	p := filepath.Join(dir, dash.ConfigMapFile)
	if err := os.WriteFile(p, dash.ConfigMap(files), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	logrus.WithField("file", p).Info("configmap written")
	return nil
}
