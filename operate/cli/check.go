package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nicpool/nicpool/ipamd/invariants"
)

func newCheckCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check nicpool's invariants over the live cluster, with the command that repairs each violation",
		Long: `Runs nicpool's invariant checker (the one every test suite ends with) over the
records, endpoints and pods stored in the API server: every record names an interface,
no pod interface holds two addresses of a family, no address is held twice, every
record belongs to a live pod or a StatefulSet ordinal that comes back. Under each
violation it prints the command that repairs it, or the one that shows more.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			vs, err := invariants.Violations(cmd.Context(), c, invariants.Options{Converged: true})
			if err != nil {
				return err
			}
			if len(vs) == 0 {
				fmt.Fprintln(o.streams.Out, "No violations.")
				return nil
			}
			for _, v := range vs {
				fmt.Fprintln(o.streams.Out, v.Message)
				if fix := repairOf(v); fix != "" {
					fmt.Fprintln(o.streams.Out, "    repair: "+fix)
				}
			}
			return findingf("%d violations", len(vs))
		},
	}
	return cmd
}

// repairOf is the command that repairs a violation, or shows what holds the address
// it concerns; empty when there is none to give.
func repairOf(v invariants.Violation) string {
	switch {
	case v.Kind == invariants.RecordGone:
		return "kubectl nicpool release " + v.Address.String() + " --force"
	case v.Kind == invariants.EndpointGone:
		ns, name, _ := strings.Cut(v.Endpoint, "/")
		return fmt.Sprintf("kubectl delete spiderendpoint -n %s %s (nicpool's garbage collector does it when it runs)", ns, name)
	case v.Address.IsValid():
		return "kubectl nicpool who " + v.Address.String() + " (shows each holder and whether it is gone)"
	}
	return ""
}
