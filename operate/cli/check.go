package cli

import (
	"fmt"
	"hash/fnv"
	"net/netip"
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
				twice := inTwoPools(vs)
				for _, v := range vs {
					fmt.Fprintln(o.streams.Out, v.Message)
					if fix := repairOf(v, twice); fix != "" {
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
	twice := inTwoPools(vs)
	for i, v := range vs {
		items[i] = output.Violation{ObjectMeta: metav1.ObjectMeta{Name: violationName(v), CreationTimestamp: at}, Status: v, Repair: repairOf(v, twice)}
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

// inTwoPools are the addresses recorded in more than one pool: release judges every
// record of an address, so each of these is released with --pool.
func inTwoPools(vs []invariants.Violation) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, v := range vs {
		if v.Kind == invariants.InTwoPools {
			out[v.Address] = true
		}
	}
	return out
}

// repairOf is the command that repairs a violation, or says exactly why none can
// and what to do instead; every kind of violation has one. twice are the addresses
// recorded in two pools (inTwoPools).
func repairOf(v invariants.Violation, twice map[netip.Addr]bool) string {
	addr := addrString(v)
	ns, name, _ := strings.Cut(v.Pod, "/")
	who := "kubectl nicpool who " + addr
	switch v.Kind {
	case invariants.RecordGone:
		if twice[v.Address] {
			// The other pool's record may be a live pod's: judge this one alone.
			return "kubectl nicpool release " + addr + " --pool " + v.Pool + " --force"
		}
		return "kubectl nicpool release " + addr + " --force"
	case invariants.EndpointGone:
		en, ename, _ := strings.Cut(v.Endpoint, "/")
		return fmt.Sprintf("nicpool's garbage collector deletes it when it runs; only nicpool's service accounts may write SpiderEndpoints, so otherwise a cluster admin runs: kubectl delete spiderendpoint -n %s %s", en, ename)
	case invariants.EndpointUnrecorded:
		return fmt.Sprintf("kubectl nicpool record %s --force: no record holds %s, so another pod may be given it; record writes the record for pod %s, which uses it, or says why it cannot (then kubectl delete pod -n %s %s, and its next incarnation gets a recorded address)", addr, addr, v.Pod, ns, name)
	case invariants.EndpointMismatch, invariants.EndpointOtherPod:
		return fmt.Sprintf("%s shows the pod the record names; when that pod is gone, kubectl nicpool release %s --force frees it; when it is live, two pods use %s: delete pod %s (kubectl delete pod -n %s %s) and it gets an address of its own", who, addr, addr, v.Pod, ns, name)
	case invariants.InTwoPools:
		return fmt.Sprintf("%s shows each record and its pod; kubectl nicpool release %s --pool POOL --force frees the record of pool POOL once its pod is gone (the other pool's record is kept); when both pods are live, two pods use %s: delete one of them (kubectl delete pod -n NAMESPACE NAME) and it gets an address of its own", who, addr, addr)
	case invariants.TwoAddresses:
		return fmt.Sprintf("both records are pod %s's (kubectl nicpool pod %s shows the one its SpiderEndpoint lists); release refuses a live pod's records: delete the pod (kubectl delete pod -n %s %s) and nicpool releases them, its next incarnation getting one address per interface and family (a StatefulSet pod keeps the one its endpoint lists and the garbage collector releases the other); once the pod is gone, kubectl nicpool release ADDRESS --force frees each", v.Pod, v.Pod, ns, name)
	case invariants.NoInterface, invariants.NoPodUID:
		return fmt.Sprintf("cannot be repaired automatically: nicpool never writes such a record (it was written by hand or by another tool); %s shows its pod, and kubectl nicpool release %s --force frees it once that pod is gone", who, addr)
	case invariants.EndpointInterface, invariants.EndpointMalformed:
		return fmt.Sprintf("cannot be repaired automatically: only nicpool's service accounts write SpiderEndpoints and they never write this; delete pod %s (kubectl delete pod -n %s %s) so that its endpoint is written again", v.Pod, ns, name)
	case invariants.Malformed:
		if addr != "" {
			return fmt.Sprintf("cannot be repaired automatically: IPBlock %s was written by hand; %s shows the address's holder, and kubectl nicpool release %s --force rewrites the block without it once its pod is gone", v.Block, who, addr)
		}
		return fmt.Sprintf("cannot be repaired automatically: IPBlock %s was written by hand; releasing any of its addresses (kubectl nicpool release ADDRESS --force) writes it again with counts that agree, or a cluster admin corrects it (kubectl edit ipblock %s)", v.Block, v.Block)
	}
	if addr != "" {
		return who + " (shows each holder and whether it is gone)"
	}
	return "cannot be repaired automatically: " + v.Message
}
