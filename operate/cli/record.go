package cli

import (
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/operate/output"
	"github.com/nicpool/nicpool/operate/repair"
)

func newRecordCommand(o *options) *cobra.Command {
	var (
		out    = newOutput()
		force  bool
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "record ADDRESS --force",
		Short: "Write the missing allocation record of an address a live pod's SpiderEndpoint lists",
		Long: `Repairs what kubectl nicpool check reports as endpoint-address-unrecorded: a pod's
SpiderEndpoint lists ADDRESS, and no pool record holds it, so nicpool could give it
to another pod. record writes the record, through nicpool's ledger, for the pod and
interface the endpoint names, when that pod is live with the endpoint's UID, no
other endpoint lists the address, no pool records it, and the pool still hands it
out (in its range, not reserved, neither disabled nor being deleted). The ledger
refuses it if another pod was given the address meanwhile. Otherwise it writes
nothing and says why, and what to do instead. --dry-run says what it would do.`,
		Example: `  kubectl nicpool record 10.6.0.12 --dry-run
  kubectl nicpool record 10.6.0.12 --force`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if force == dryRun {
				return errors.New("give --force to write the record, or --dry-run to see what would be written")
			}
			addr, err := addressArg(args[0])
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			r, err := repair.Record(cmd.Context(), c, addr.Unmap(), o.now(), logr.Discard(), repair.Options{DryRun: dryRun})
			if errors.Is(err, repair.ErrNotListed) {
				return &Finding{Msg: err.Error() + ": there is nothing to record (kubectl nicpool who " + addr.String() + " shows whether a pool records it)"}
			}
			if err != nil {
				return err
			}
			if !out.table() {
				list := output.NewList[output.Recording](output.KindRecording, []output.Recording{{ObjectMeta: metav1.ObjectMeta{Name: r.Address}, Status: *r}})
				if err := out.object(o.streams.Out, list); err != nil {
					return err
				}
			} else if r.Recorded || r.WouldRecord {
				verb := "recorded"
				if r.WouldRecord {
					verb = "would record"
				}
				fmt.Fprintf(o.streams.Out, "%s %s in pool %s for pod %s (UID %s) interface %s\n", verb, r.Address, r.Pool, r.Pod, r.PodUID, r.Interface)
			}
			if r.Refused != "" {
				return findingf("refused to record %s, nothing was written: %s", r.Address, r.Refused)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "write the record (required, unless --dry-run)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be recorded, or why not; write nothing")
	out.addFlag(cmd)
	return cmd
}
