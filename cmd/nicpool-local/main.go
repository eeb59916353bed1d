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

	"github.com/go-logr/logr/funcr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nicpool/nicpool/e2e/local"
)

func main() {
	state := flag.String("state-dir", ".local", "where the kubeconfig, logs and local state are written")
	nodes := flag.Int("nodes", 3, "number of nodes")
	nodeKind := flag.String("node", string(local.NodeStandIn), "what plays the nodes: standin (in-process stand-ins) or kubelet (real kubelet + containerd + runc)")
	detached := flag.Bool("detached", false, "run was started by up (internal)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, `usage: %s run|up|down [flags]

  run   start the local cluster with nicpool and the examples; Ctrl-C stops it
  up    the same in the background; returns when it is ready
  down  stop what up started
  import FILE...  import image archives into every node of a cluster of real nodes

`, filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	if len(os.Args) < 2 {
		flag.Usage()
		os.Exit(2)
	}
	verb := os.Args[1]
	if verb == "node-init" {
		if err := nodeInit(os.Args[2:]); err != nil {
			fail(err)
		}
		return
	}
	_ = flag.CommandLine.Parse(os.Args[2:])
	// controller-runtime's clients report the API server's warnings (a deprecated
	// field, a finalizer name) through its logger; without one set it prints a
	// goroutine's stack in the middle of `make up`'s output. A warning is one line.
	ctrllog.SetLogger(funcr.New(func(_, args string) { fmt.Fprintln(os.Stderr, args) }, funcr.Options{}))
	dir, err := filepath.Abs(*state)
	if err != nil {
		fail(err)
	}
	switch verb {
	case "run":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = run(ctx, dir, *nodes, local.NodeKind(*nodeKind), *detached)
	case "up":
		err = up(dir, *nodes, *nodeKind)
	case "down":
		err = down(dir)
	case "import":
		err = importImages(context.Background(), dir, flag.Args())
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
