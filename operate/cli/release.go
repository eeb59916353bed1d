package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nicpool/nicpool/operate/inspect"
	"github.com/nicpool/nicpool/operate/output"
	"github.com/nicpool/nicpool/operate/repair"
)

func newReleaseCommand(o *options) *cobra.Command {
	var (
		out   = newOutput()
		force bool
	)
	cmd := &cobra.Command{
		Use:   "release ADDRESS --force",
		Short: "Free an address whose holder is gone, finished, or terminating past its grace period",
		Long: `Removes the allocation record of ADDRESS, through nicpool's ledger, when no pod can
still use the address: its pod is gone, has finished, or is terminating past its grace
period (for example on a node that is down, where nicpool's garbage collector keeps
the addresses of terminating pods). It refuses, writing nothing and saying why, while
the pod is live, within its grace period, or a StatefulSet ordinal that will come back
for the address. --force is required: the address is freed without the CNI plugin
removing it from the pod's interface.`,
		Example: `  kubectl nicpool release 10.6.0.12 --force`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			addr, err := addressArg(args[0])
			if err != nil {
				return err
			}
			if !force {
				return fmt.Errorf("release frees %s without the CNI plugin removing it from an interface: give --force (kubectl nicpool who %s shows its holder)", addr, addr)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			ds, err := repair.Release(cmd.Context(), c, addr.Unmap(), o.now(), logr.Discard())
			if errors.Is(err, inspect.ErrNotAllocated) {
				return &Finding{Msg: err.Error()}
			}
			if !out.table() {
				if perr := out.object(o.streams.Out, decisionsList(ds)); perr != nil {
					return perr
				}
			} else {
				for _, d := range ds {
					if d.Released {
						fmt.Fprintf(o.streams.Out, "released %s of pool %s, held by pod %s (UID %s) interface %s (%s)\n", d.Address, d.Pool, d.Pod, d.PodUID, d.Interface, state(d.Holder))
					}
				}
			}
			if err != nil {
				return err
			}
			var why []string
			for _, d := range ds {
				if d.Refused != "" {
					why = append(why, fmt.Sprintf("pool %s: %s", d.Pool, d.Refused))
				}
			}
			if len(why) > 0 {
				return findingf("refused to release %s, nothing was written: %s", addr, strings.Join(why, "; "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "free the address (required)")
	out.addFlag(cmd)
	return cmd
}

func decisionsList(ds []repair.Decision) runtime.Object {
	items := make([]output.ReleaseDecision, len(ds))
	for i, d := range ds {
		items[i] = output.ReleaseDecision{ObjectMeta: metav1.ObjectMeta{Name: d.Address}, Status: d}
	}
	return output.NewList[output.ReleaseDecision](output.KindReleaseDecision, items)
}
