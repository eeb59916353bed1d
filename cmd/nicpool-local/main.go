// Command nicpool-local runs nicpool on this machine without Docker: `run` stays in
// the foreground until interrupted (`make run`), `up` starts the same in the
// background and returns once it is ready (`make up`), `down` stops it (`make down`).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	state := flag.String("state-dir", ".local", "where the kubeconfig, logs and local state are written")
	nodes := flag.Int("nodes", 3, "number of node stand-ins")
	detached := flag.Bool("detached", false, "run was started by up (internal)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, `usage: %s run|up|down [flags]

  run   start the local cluster with nicpool and the examples; Ctrl-C stops it
  up    the same in the background; returns when it is ready
  down  stop what up started

`, filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	if len(os.Args) < 2 {
		flag.Usage()
		os.Exit(2)
	}
	verb := os.Args[1]
	_ = flag.CommandLine.Parse(os.Args[2:])
	dir, err := filepath.Abs(*state)
	if err != nil {
		fail(err)
	}
	switch verb {
	case "run":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = run(ctx, dir, *nodes, *detached)
	case "up":
		err = up(dir, *nodes)
	case "down":
		err = down(dir)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "nicpool-local:", err)
	os.Exit(1)
}

// display shows a path of the state directory as the user would type it: relative to
// the working directory when it lies beneath it.
func display(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return path
	}
	return rel
}
