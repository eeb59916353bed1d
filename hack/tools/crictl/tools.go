//go:build tools

// Package tools pins crictl, the CRI client to look into a real node's containers
// (`hack/tools/build.sh crictl`; not needed by the tests).
package tools

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
