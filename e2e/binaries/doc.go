// Package binaries builds nicpool's commands from this checkout and runs them as the
// manifests deploy them (flags, Go runtime settings), as child processes that die with
// the test binary. It reads what a running process costs, CPU seconds and resident
// memory, from /proc. The memory and scale benchmarks drive the real binaries with it.
package binaries
