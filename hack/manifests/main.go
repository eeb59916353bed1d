// Command manifests writes the generated parts of manifests/base (CRDs, webhook
// configurations, admission policies) from their Go sources, and the Helm chart
// charts/nicpool from the kustomizations; `make manifests` runs it from the
// repository root.
package main

import (
	"fmt"
	"os"

	"github.com/nicpool/nicpool/manifests"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	paths, err := manifests.Write(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
	for _, p := range paths {
		fmt.Println("wrote", p)
	}
}
