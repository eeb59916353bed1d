package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nicpool/nicpool/operate/inspect"
	"github.com/nicpool/nicpool/operate/output"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

func newStatusCommand(o *options) *cobra.Command {
	out := newOutput()
	var (
		opts       inspect.StatusOptions
		waitFor    bool
		waitLimit  time.Duration
		certMinDay int
		poolFullAt int
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Check that nicpool is healthy: the webhook, ipamd on every node, the CNI plugin, the pools; each problem with its fix",
		Long: `Checks, through the API server:

  webhook   its configurations exist and carry the injected CA; the serving
            certificate is signed by that CA and valid for --cert-min-days more days;
            the API server can call it (a dry-run SpiderIPPool, which writes nothing);
            its Deployment has a ready replica; a replica leads (its Lease is renewed)
  ipamd     on every node that runs pods on a pod network, ipamd serves with its
            caches synced (its heartbeat Lease nicpool-ipamd-NODE is renewed)
  cni       on every node of the ipamd DaemonSet, its init container installed the
            CNI plugin from the image the DaemonSet installs now
  pools     no enabled pool with addresses is --pool-full-percent full

It prints one line per check, then each problem with its fix, and exits 1 when there
is any problem. A check your rights do not allow passes and says so. --wait checks
again until all pass or --wait-duration is over.`,
		Example: `  kubectl nicpool status
  kubectl nicpool status --wait --wait-duration=2m
  kubectl nicpool status -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			opts.CertMinValidity = time.Duration(certMinDay) * 24 * time.Hour
			opts.PoolFullAt = float64(poolFullAt) / 100
			run := func(ctx context.Context) ([]inspect.Check, error) {
				opts.Now = o.now()
				return inspect.Status(ctx, c, opts)
			}
			checks, err := run(cmd.Context())
			if err != nil {
				return err
			}
			if waitFor && len(inspect.Problems(checks)) > 0 {
				ctx, cancel := context.WithTimeout(cmd.Context(), waitLimit)
				defer cancel()
				_ = wait.PollUntilContextCancel(ctx, 2*time.Second, false, func(ctx context.Context) (bool, error) {
					cs, err := run(ctx)
					if err != nil {
						return false, nil //nolint:nilerr // the API server may come back: polled again until the deadline
					}
					checks = cs
					return len(inspect.Problems(cs)) == 0, nil
				})
			}
			if out.table() {
				err = printStatus(out, o, checks)
			} else {
				err = out.object(o.streams.Out, statusList(checks))
			}
			if err != nil {
				return err
			}
			if n := len(inspect.Problems(checks)); n > 0 {
				return findingf("%d problems", n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Namespace, "nicpool-namespace", configs.DefaultNamespace, "the namespace nicpool runs in")
	cmd.Flags().StringVar(&opts.LeaderLease, "leader-election-id", "nicpool-webhook", "the webhook's leader election Lease (its --leader-election-id)")
	cmd.Flags().StringVar(&opts.CertSecret, "cert-secret", "nicpool-webhook-cert", "the Secret holding the webhook's serving certificate (only tls.crt is read)")
	cmd.Flags().IntVar(&certMinDay, "cert-min-days", 14, "a serving certificate that expires within this many days is a problem")
	cmd.Flags().IntVar(&poolFullAt, "pool-full-percent", 90, "an enabled pool with this percentage of its addresses in use is a problem")
	cmd.Flags().BoolVar(&waitFor, "wait", false, "check again until every check passes or --wait-duration is over")
	cmd.Flags().DurationVar(&waitLimit, "wait-duration", 5*time.Minute, "how long --wait waits")
	out.addFlag(cmd)
	return cmd
}

func printStatus(out *outputFlags, o *options, checks []inspect.Check) error {
	cols := []column{{name: "CHECK"}, {name: "STATE"}, {name: "MESSAGE"}, {name: "COMPONENT", wide: true}, {name: "NODE", wide: true}}
	var rows [][]any
	for _, c := range checks {
		state := "ok"
		if !c.OK {
			state = "PROBLEM"
		}
		rows = append(rows, []any{c.Name, state, c.Message, c.Component, orDash(c.Node)})
	}
	if err := out.tabulate(o.streams.Out, cols, rows); err != nil {
		return err
	}
	problems := inspect.Problems(checks)
	if len(problems) > 0 {
		fmt.Fprintf(o.streams.Out, "\n%d problems:\n", len(problems))
		for _, p := range problems {
			fmt.Fprintf(o.streams.Out, "%s: %s\n    fix: %s\n", p.Name, p.Message, p.Fix)
		}
	}
	return nil
}

func statusList(checks []inspect.Check) *output.StatusCheckList {
	items := make([]output.StatusCheck, len(checks))
	for i, c := range checks {
		items[i] = output.StatusCheck{ObjectMeta: metav1.ObjectMeta{Name: c.Name}, Status: c}
	}
	return output.NewList[output.StatusCheck](output.KindStatusCheck, items)
}
