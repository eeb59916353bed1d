// Command kube-apiserver is the upstream API server at the lowest Kubernetes release nicpool
// supports (go.mod of this module), for `make test-floor`.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
