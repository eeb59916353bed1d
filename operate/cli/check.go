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
		Short: "Check nicpool's invariants over the live cluster",
		Long: `Runs nicpool's invariant checker (the one every test suite ends with) over the
records, endpoints and pods stored in the API server: every record names an interface,
no pod interface holds two addresses of a family, no address is held twice, every
record belongs to a live pod or a StatefulSet ordinal that comes back.`,
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
			}
			return findingf("%d violations", len(lines))
		},
	}
	return cmd
}
