//go:build suites

package spiderpool

// The suites' code: spiderpool's e2e helpers, which every suite of Suites imports, so
// that `go mod tidy` keeps spiderpool (and what its suites need) in this module's
// go.mod and go.sum. The harness compiles the suites themselves with `go test -c`.
import _ "github.com/spidernet-io/spiderpool/test/e2e/common"
