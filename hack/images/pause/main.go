// Command pause is the pod sandbox of local nodes: the first process of a pod, it holds
// the pod's namespaces, reaps the orphans it inherits as PID 1, and exits when told to
// stop (SIGINT, SIGTERM). It stands in for the upstream pause image, which cannot be
// pulled where there is no registry; like it, `-v` prints its version and exits (a
// container that completes at once).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is the upstream release this pause stands in for (the tag of its image).
const version = "3.10"

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-v" {
		fmt.Println("pause (nicpool) " + version)
		return
	}
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: pause [-v]: waits for SIGINT or SIGTERM; -v prints the version")
		os.Exit(1)
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited: orphans of the pod re-parented to PID 1.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
