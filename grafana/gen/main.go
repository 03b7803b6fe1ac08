// Command gen writes gpuscope's dashboards as JSON under dashboards/, the
// one home of the dashboards: the Helm chart reads them there through its
// files/dashboards link. With -configmap it writes, instead, the dashboards
// as a ConfigMap for Grafana's dashboard sidecar, which `make release`
// ships beside the archives. Run it from the grafana/ module: go run ./gen
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
	dir := flag.String("dir", ".", "the grafana/ directory to write dashboards/ into")
	configMap := flag.String("configmap", "", "write only the dashboards' ConfigMap, to this file")
	flag.Parse()
	if err := run(*dir, *configMap); err != nil {
		logrus.WithError(err).Fatal("generating dashboards")
	}
}

func run(dir, configMap string) error {
	files, err := dash.Files()
	if err != nil {
		return err
	}
	if configMap != "" {
		if err := os.WriteFile(configMap, dash.ConfigMap(files), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", configMap, err)
		}
		logrus.WithField("file", configMap).Info("configmap written")
		return nil
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
	return nil
}
