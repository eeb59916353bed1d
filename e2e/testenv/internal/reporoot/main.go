// Command reporoot prints testenv.RepoRoot, for the test that builds it as `make
// build` builds nicpool's commands (-trimpath).
package main

import (
	"fmt"

	"github.com/nicpool/nicpool/e2e/testenv"
)

func main() { fmt.Println(testenv.RepoRoot()) }
