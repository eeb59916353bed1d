// Command kubectl-nicpool is the kubectl plugin `kubectl nicpool`: inspect and repair
// nicpool's address allocations, and migrate a cluster from spiderpool. On PATH as
// kubectl-nicpool, kubectl runs it for `kubectl nicpool …`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/nicpool/nicpool/operate/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	// Run as kubectl's completion helper (a link named kubectl_complete-nicpool),
	// kubectl passes the words to complete: answer as `__complete` does.
	if name := strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe"); name == cli.CompletionShim {
		cmd.SetArgs(append([]string{cobra.ShellCompRequestCmd}, os.Args[1:]...))
	}
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
	os.Exit(cli.ExitCode(err))
}
