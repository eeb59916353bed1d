package cli

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/operate/output"
)

func newCheckCommand(o *options) *cobra.Command {
	out := newOutput()
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check nicpool's invariants over the live cluster, with the command that repairs each violation",
		Long: `Runs nicpool's invariant checker (the one every test suite ends with) over the
records, endpoints and pods stored in the API server: every record names an interface,
no pod interface holds two addresses of a family, no address is held twice, every
record belongs to a live pod or a StatefulSet ordinal that comes back. Under each
violation it prints the command that repairs it, or says why none can.

-o json or yaml prints a ViolationList: a report that release --from-report reads.`,
		Example: `  kubectl nicpool check
  kubectl nicpool check -o json > report.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			at := metav1.NewTime(o.now().UTC().Truncate(1e9))
			vs, err := invariants.Violations(cmd.Context(), c, invariants.Options{Converged: true})
			if err != nil {
				return err
			}
			if !out.table() {
				if err := out.object(o.streams.Out, violationsList(vs, at)); err != nil {
					return err
				}
			} else if len(vs) == 0 {
				fmt.Fprintln(o.streams.Out, "No violations.")
			} else {
				for _, v := range vs {
					fmt.Fprintln(o.streams.Out, v.Message)
					if fix := repairOf(v); fix != "" {
						fmt.Fprintln(o.streams.Out, "    repair: "+fix)
					}
				}
			}
			if len(vs) > 0 {
				return findingf("%d violations", len(vs))
			}
			return nil
		},
	}
	out.addFlag(cmd)
	return cmd
}

func violationsList(vs []invariants.Violation, at metav1.Time) *output.ViolationList {
	items := make([]output.Violation, len(vs))
	for i, v := range vs {
		items[i] = output.Violation{ObjectMeta: metav1.ObjectMeta{Name: violationName(v), CreationTimestamp: at}, Status: v, Repair: repairOf(v)}
	}
	return output.NewList[output.Violation](output.KindViolation, items)
}

// violationName names what a violation concerns, the same in every report that finds
// it: its kind, then its pool and address, endpoint or block.
func violationName(v invariants.Violation) string {
	parts := []string{string(v.Kind)}
	for _, p := range []string{v.Pool, addrString(v), strings.ReplaceAll(v.Endpoint, "/", "."), v.Block} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 1 {
		h := fnv.New32a()
		h.Write([]byte(v.Message))
		parts = append(parts, fmt.Sprintf("%08x", h.Sum32()))
	}
	return strings.Join(parts, ".")
}

func addrString(v invariants.Violation) string {
	if !v.Address.IsValid() {
		return ""
	}
	return v.Address.String()
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
