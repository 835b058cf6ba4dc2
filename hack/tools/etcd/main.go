// Command etcd is etcd's server, built from go.etcd.io/etcd/server/v3 in the same module
// graph as kube-apiserver so the two agree on the etcd client and API versions.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
