// Command etcd is etcd's server, built from its etcdmain package at the
// version go.mod pins, for the Kubernetes tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
