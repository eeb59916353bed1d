package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/nicpool/nicpool/operate/sysdump"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

func newSysdumpCommand(o *options) *cobra.Command {
	opts := sysdump.Options{}
	var file string
	cmd := &cobra.Command{
		Use:   "sysdump",
		Short: "Write one archive of what a bug report needs: nicpool's objects, its components' logs and metrics, and check, status and version",
		Long: `Writes a .tar.gz of what a bug report about nicpool needs, read through the API
server with your rights:

  objects/   SpiderIPPools, SpiderReservedIPs, SpiderEndpoints, IPBlocks,
             NetworkAttachmentDefinitions, Nodes, nicpool's webhook configurations
             and admission policies, the Events nicpool's components reported, and in
             --nicpool-namespace its Pods, DaemonSets, Deployments, Leases and Events
  logs/      each container's log of nicpool's pods (and the previous one after a
             restart), --logs-since and --logs-limit-bytes each
  metrics/   each pod's metrics, through the API server's pod proxy
  check.*, status.*, version.txt
             what those commands print
  errors.txt what could not be read, and why

Nothing secret is read: no Secret (the status report reads the webhook certificate's
public half only), no managed fields. Look through the archive before you share it:
pod names, namespaces, node names and addresses are in it.`,
		Example: `  kubectl nicpool sysdump
  kubectl nicpool sysdump --output-file /tmp/nicpool.tar.gz --logs-since 2h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			cfg, err := o.restConfig()
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			opts.Now = o.now()
			if file == "" {
				file = "nicpool-sysdump-" + opts.Now.UTC().Format("20060102-150405") + ".tar.gz"
			}
			opts.Reports = map[string]func(context.Context, io.Writer) error{
				"check.txt":   o.report(newCheckCommand),
				"check.json":  o.report(newCheckCommand, "-o", "json"),
				"status.txt":  o.report(newStatusCommand, "--nicpool-namespace", opts.Namespace),
				"status.json": o.report(newStatusCommand, "--nicpool-namespace", opts.Namespace, "-o", "json"),
				"pools.txt":   o.report(newPoolsCommand, "-o", "wide"),
				"version.txt": o.report(newVersionCommand),
			}
			if file == "-" {
				return sysdump.Write(cmd.Context(), o.streams.Out, c, cs, opts)
			}
			f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("--output-file: %w", err)
			}
			if err := sysdump.Write(cmd.Context(), f, c, cs, opts); err != nil {
				f.Close()
				os.Remove(file)
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "wrote %s\n", file)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "output-file", "", "the archive to write (it must not exist), - for standard output; default nicpool-sysdump-TIME.tar.gz in the current directory")
	cmd.Flags().StringVar(&opts.Namespace, "nicpool-namespace", configs.DefaultNamespace, "the namespace nicpool runs in")
	cmd.Flags().DurationVar(&opts.LogsSince, "logs-since", 24*time.Hour, "read each container's log from this long ago; 0 reads all of it")
	cmd.Flags().Int64Var(&opts.LogsLimitBytes, "logs-limit-bytes", 16<<20, "read at most this much of each container's log")
	return cmd
}

// report runs one of the plugin's commands with args into w, as sysdump's reports do:
// with the same kubeconfig flags, its findings kept (they are what a report is for).
func (o *options) report(newCmd func(*options) *cobra.Command, args ...string) func(context.Context, io.Writer) error {
	return func(ctx context.Context, w io.Writer) error {
		sub := *o
		sub.streams = genericiooptions.IOStreams{In: nil, Out: w, ErrOut: w}
		cmd := newCmd(&sub)
		cmd.SetArgs(args)
		cmd.SetOut(w)
		cmd.SetErr(w)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		return cmd.ExecuteContext(ctx)
	}
}
