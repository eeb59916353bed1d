package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// readyFile is written once the cluster serves the examples; `up` waits for it.
const readyFile = "ready"

// leftoversFile is written by a run that stopped: what it left behind (processes,
// namespaces, cgroups, mounts), one per line; empty when nothing.
const leftoversFile = "leftovers"

// run brings the cluster up and keeps it up until ctx ends; detached says `up`
// started it in the background.
func run(ctx context.Context, dir string, nodes int, kind local.NodeKind, detached bool) error {
	_ = os.Remove(filepath.Join(dir, readyFile))
	for _, stale := range []string{"cluster", "nodes", "fabric"} {
		if err := os.RemoveAll(filepath.Join(dir, stale)); err != nil {
			return err
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	s, err := local.Up(ctx, local.Options{Dir: dir, Kubeconfig: kubeconfig, Nodes: nodes, Node: kind, Out: os.Stdout})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping")
		if err := s.Down(); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
		}
		_ = os.Remove(filepath.Join(dir, readyFile))
		// What `down` reports: anything of the run still there after it stopped.
		left := strings.Join(s.Leftovers(), "\n")
		if err := os.WriteFile(filepath.Join(dir, leftoversFile), []byte(left), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
		}
	}()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	examples := filepath.Join(root, "examples")
	if _, err := os.Stat(examples); err != nil {
		examples = filepath.Join(testenv.RepoRoot(), "examples")
	}
	created, err := s.ApplyExamples(ctx, examples)
	if err != nil {
		return err
	}
	fmt.Printf("applied %d objects from %s\n", len(created), display(examples))
	if err := s.WaitRunning(ctx, "default", map[string]string{"app": "web"}, 3, 3*time.Minute); err != nil {
		fmt.Fprintln(os.Stderr, "warning:", err)
	}
	if err := show(ctx, s); err != nil {
		return err
	}
	fmt.Printf("\nkubeconfig: %s\ntry: kubectl --kubeconfig %s get sp,se,pods -A\nlogs: %s\n", display(kubeconfig), display(kubeconfig), display(dir))
	if !detached {
		fmt.Println("Ctrl-C stops the cluster.")
	}
	if err := os.WriteFile(filepath.Join(dir, readyFile), []byte(kubeconfig+"\n"), 0o644); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func show(ctx context.Context, s *local.Stack) error {
	t, err := local.GetTable(ctx, s.Config, testenv.PoolsResource, "")
	if err != nil {
		return err
	}
	fmt.Println("\n$ kubectl get sp")
	if err := local.PrintTable(os.Stdout, t); err != nil {
		return err
	}
	rows, err := s.PodInterfaces(ctx, "default")
	if err != nil {
		return err
	}
	fmt.Println("\npods in default, per interface (Multus network-status; pools from SpiderIPPool status):")
	return local.PrintPodInterfaces(os.Stdout, rows)
}
