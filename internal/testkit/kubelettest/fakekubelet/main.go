// Command fakekubelet serves the kubelet PodResources API on a unix socket
// with the pods of a JSON file, for end-to-end runs without a cluster.
//
//	fakekubelet -socket /tmp/kubelet.sock -pods pods.json
//
// The file is a JSON array of {"name","namespace","containers":[{"name",
// "devices":[{"resource","ids":[...]}]}]}. SIGHUP reloads it.
//
//	fakekubelet -socket /tmp/kubelet.sock -hostile containers
//
// serves a broken or hostile kubelet instead: -hostile containers or
// device-ids answers every List with -hostile-bytes of empty entries,
// silent accepts and never answers, ping-flood and settings-flood answer
// and then send those frames without end.
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
	podsFile := flag.String("pods", "", "JSON file with the pods to serve (required unless -hostile)")
	hostile := flag.String("hostile", "", "serve a hostile kubelet: containers, device-ids, silent, ping-flood or settings-flood")
	hostileBytes := flag.Int("hostile-bytes", 8<<20, "size of a hostile answer (containers, device-ids)")
	flag.Parse()
	if *hostile != "" {
		serveHostile(*socket, *hostile, *hostileBytes)
		return
	}
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

// serveHostile serves a hostile kubelet until SIGINT or SIGTERM.
func serveHostile(socket, mode string, size int) {
	h, err := kubelettest.HostileMode(mode, size)
	if err != nil {
		logrus.WithError(err).Fatal("-hostile")
	}
	srv, err := kubelettest.StartHostile(socket, h)
	if err != nil {
		logrus.WithError(err).Fatal("cannot serve")
	}
	logrus.WithFields(logrus.Fields{"socket": socket, "hostile": mode}).Info("hostile kubelet serving")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	logrus.WithFields(logrus.Fields{"accepted": srv.Accepted(), "open": srv.Open(), "flood_frames": srv.Frames()}).Info("hostile kubelet stopping")
	srv.Stop()
}
