// Command fakekubelet serves the kubelet PodResources API on a unix socket
// with the pods of a JSON file, for end-to-end runs without a cluster.
//
//	fakekubelet -socket /tmp/kubelet.sock -pods pods.json
//
// The file is a JSON array of {"name","namespace","containers":[{"name",
// "devices":[{"resource","ids":[...]}]}]}. SIGHUP reloads it.
package main

import (
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
)

func main() {
	socket := flag.String("socket", "kubelet.sock", "unix socket to serve the PodResources API on")
	podsFile := flag.String("pods", "", "JSON file with the pods to serve (required)")
	flag.Parse()
	if *podsFile == "" {
		logrus.Fatal("-pods: a JSON pod list is required")
	}
	pods, err := kubelettest.LoadPods(*podsFile)
	if err != nil {
		logrus.WithError(err).Fatal("cannot load pods")
	}
	srv, err := kubelettest.Start(*socket, pods)
	if err != nil {
		logrus.WithError(err).Fatal("cannot serve")
	}
	logrus.WithFields(logrus.Fields{"socket": *socket, "pods": len(pods)}).Info("fake kubelet serving")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	for s := range sig {
		if s != syscall.SIGHUP {
			break
		}
		pods, err := kubelettest.LoadPods(*podsFile)
		if err != nil {
			logrus.WithError(err).Error("reload failed; serving the previous pods")
			continue
		}
		srv.SetPods(pods)
		logrus.WithField("pods", len(pods)).Info("pods reloaded")
	}
	srv.Stop()
}
