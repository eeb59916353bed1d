package cli

import (
	"fmt"
	"net/netip"
	"regexp"
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
			err = invariants.Check(cmd.Context(), c, invariants.Options{Converged: true})
			if err == nil {
				fmt.Fprintln(o.streams.Out, "No violations.")
				return nil
			}
			lines := strings.Split(err.Error(), "\n")
			for _, l := range lines {
				fmt.Fprintln(o.streams.Out, l)
				if fix := repairOf(l); fix != "" {
					fmt.Fprintln(o.streams.Out, "    repair: "+fix)
				}
			}
			return findingf("%d violations", len(lines))
		},
	}
	return cmd
}

var (
	// "I4: POOL/ADDRESS is held by pod NS/NAME UID UID, which is gone"
	goneRecord = regexp.MustCompile(`^I4: [^/\s]+/(\S+) is held by pod `)
	// "I4: endpoint NS/NAME belongs to pod UID UID, which is gone"
	goneEndpoint = regexp.MustCompile(`^I4: endpoint ([^/\s]+)/(\S+) belongs to pod UID `)
	anyAddress   = regexp.MustCompile(`[0-9a-fA-F:.]*[:.][0-9a-fA-F:.]+`)
)

// repairOf is the command that repairs a violation the checker reported, or shows
// what holds the address it names; empty when there is none to give.
func repairOf(violation string) string {
	if m := goneRecord.FindStringSubmatch(violation); m != nil {
		return "kubectl nicpool release " + m[1] + " --force"
	}
	if m := goneEndpoint.FindStringSubmatch(violation); m != nil {
		return fmt.Sprintf("kubectl delete spiderendpoint -n %s %s (nicpool's garbage collector does it when it runs)", m[1], m[2])
	}
	for _, s := range anyAddress.FindAllString(violation, -1) {
		if a, err := netip.ParseAddr(s); err == nil {
			return "kubectl nicpool who " + a.String() + " (shows each holder and whether it is gone)"
		}
	}
	return ""
}
