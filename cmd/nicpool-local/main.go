// Command nicpool-local runs nicpool on this machine without Docker (`make run`).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/nicpool/nicpool/e2e/local"
)

func main() {
	state := flag.String("state-dir", ".local", "where the kubeconfig and local state are written")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s run [flags]\n\nStarts the local control plane with nicpool and stays up until interrupted.\n\n", filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	if len(os.Args) < 2 || os.Args[1] != "run" {
		flag.Usage()
		os.Exit(2)
	}
	_ = flag.CommandLine.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *state); err != nil {
		fmt.Fprintln(os.Stderr, "nicpool-local:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, state string) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	c, err := local.Up(ctx, root, state, os.Stdout)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping")
		if err := c.Down(); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
		}
	}()
	if err := c.Show(ctx, os.Stdout); err != nil {
		return err
	}
	abs, _ := filepath.Abs(c.Kubeconfig)
	fmt.Printf("\nkubeconfig: %s\ntry: kubectl --kubeconfig %s get sp\nCtrl-C stops the cluster.\n", abs, abs)
	<-ctx.Done()
	return nil
}
