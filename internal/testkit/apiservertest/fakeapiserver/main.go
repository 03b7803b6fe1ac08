// Command fakeapiserver serves the fake Kubernetes API server of
// apiservertest on an address, with one pod on a node, for runs of the real
// binary without a cluster (scripts/abuse.sh). It writes the CA and the
// token a pod would have mounted into -dir.
//
//	fakeapiserver -addr 127.0.0.1:6443 -dir /tmp/sa -node node-1 -labels team=vision
//
// -hostile makes it a broken or hostile server: list-410 serves normally
// for -after, then expires the watch and answers every LIST 410 Gone;
// redirect answers every request with a 302 to a plain-HTTP server of its
// own on -redirect-addr, which counts the requests that bring a token.
// -huge-label adds three labels of that many bytes to the pod. SIGTERM
// prints what was asked (lists=, watches=, leaked_tokens=) and ends it.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/testkit/apiservertest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6443", "address to serve on")
	dir := flag.String("dir", ".", "folder for ca.crt and token")
	node := flag.String("node", "node-1", "node of the pod")
	labels := flag.String("labels", "team=vision", "the pod's labels, k=v,...")
	huge := flag.Int("huge-label", 0, "add three labels (huge-0..2) of this many bytes")
	hostile := flag.String("hostile", "", "list-410 or redirect")
	after := flag.Duration("after", 3*time.Second, "list-410: how long to serve normally first")
	redirectAddr := flag.String("redirect-addr", "127.0.0.1:6444", "redirect: the plain-HTTP server's address")
	flag.Parse()

	srv, err := apiservertest.New(*dir, *addr, logrus.Errorf)
	if err != nil {
		logrus.WithError(err).Fatal("cannot serve")
	}
	pod := apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: *node, Labels: map[string]string{}}
	for _, kv := range strings.Split(*labels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			pod.Labels[k] = v
		}
	}
	for i := range 3 {
		if *huge > 0 {
			pod.Labels[fmt.Sprintf("huge-%d", i)] = strings.Repeat("x", *huge)
		}
	}
	srv.Set(pod)
	var leaked atomic.Int64
	switch *hostile {
	case "":
	case "list-410":
		go func() {
			time.Sleep(*after)
			srv.FailLists(http.StatusGone)
			srv.Expire()
		}()
	case "redirect":
		plain := &http.Server{Addr: *redirectAddr, ReadHeaderTimeout: 10 * time.Second,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "" {
					leaked.Add(1)
				}
				http.NotFound(w, r)
			})}
		go func() { _ = plain.ListenAndServe() }()
		srv.RedirectTo("http://" + *redirectAddr)
	default:
		logrus.Fatalf("-hostile %q: want list-410 or redirect", *hostile)
	}
	logrus.WithFields(logrus.Fields{"url": srv.URL(), "hostile": *hostile}).Info("fake API server serving")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	lists, watches := 0, 0
	for _, r := range srv.Requests() {
		if r.Watch {
			watches++
		} else {
			lists++
		}
	}
	fmt.Printf("lists=%d watches=%d leaked_tokens=%d\n", lists, watches, leaked.Load())
	srv.Stop()
}
