package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/operate/migrate"
	"github.com/nicpool/nicpool/operate/output"
)

func newMigrateCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Move a cluster's allocations from another IPAM to nicpool",
	}
	cmd.AddCommand(newFromSpiderpoolCommand(o))
	return cmd
}

func newFromSpiderpoolCommand(o *options) *cobra.Command {
	var (
		out                  = newOutput()
		dryRun, apply, loose bool
		switches             ipamconf.Switches
	)
	cmd := &cobra.Command{
		Use:   "from-spiderpool (--dry-run | --apply)",
		Short: "Move spiderpool's allocation records into nicpool's form, keeping every pod's addresses",
		Long: `Reads spiderpool's records (each pool's status.allocatedIPs string) and SpiderEndpoints,
places every record on a pod interface, and reports what it cannot place.

--dry-run writes nothing. --apply refuses while anything blocks (spiderpool still
running, records of running pods it cannot place, objects spiderpool would delete);
otherwise it installs nicpool's CRDs over spiderpool's (the stored objects stay),
writes each pool's records in nicpool's form and removes spiderpool's string, then
writes on each running pod the annotations nicpool's pod webhook would have written
(every ippools entry naming its interface, ippool turned into an entry, a StatefulSet
pod's endpoint stamp), so that nicpool answers its next CNI ADD. Run it again after an
interruption: what is done already is skipped.

See docs/migrate-from-spiderpool.md for the whole procedure.`,
		Example: `  kubectl nicpool migrate from-spiderpool --dry-run
  kubectl nicpool migrate from-spiderpool --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if dryRun == apply {
				return errors.New("give exactly one of --dry-run and --apply")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			disc, err := o.discovery()
			if err != nil {
				return err
			}
			given := false
			for _, st := range ipamconf.Settings {
				given = given || cmd.Flags().Changed(st.Flag)
			}
			plan, err := migrate.Run(cmd.Context(), c, disc, migrate.Options{DropUnplaced: loose, Switches: switches, SwitchesGiven: given})
			if err != nil {
				return err
			}
			if out.table() {
				err = printPlan(out, o.streams.Out, plan)
			} else {
				err = out.object(o.streams.Out, &output.MigrationPlan{
					TypeMeta:   metav1.TypeMeta{APIVersion: output.GroupVersion.String(), Kind: output.KindMigrationPlan},
					ObjectMeta: metav1.ObjectMeta{Name: "from-spiderpool"}, Status: plan})
			}
			if err != nil {
				return err
			}
			if len(plan.Blockers) > 0 {
				what := "--apply would refuse"
				if apply {
					what = "refused; nothing was written"
				}
				return findingf("%d problems block the migration (%s): deal with each as its fix says, then run it again", len(plan.Blockers), what)
			}
			if dryRun {
				return nil
			}
			log := funcr.New(func(_, args string) { fmt.Fprintln(o.streams.ErrOut, args) }, funcr.Options{})
			if err := migrate.Apply(cmd.Context(), c, plan, log); err != nil {
				return err
			}
			if out.table() {
				fmt.Fprintln(o.streams.Out, "\nDone: every pool is in nicpool's form. Next: install nicpool (docs/migrate-from-spiderpool.md).")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be migrated and what blocks it; write nothing")
	cmd.Flags().BoolVar(&apply, "apply", false, "migrate")
	cmd.Flags().BoolVar(&loose, "drop-unplaced", false, "free the addresses of records of running pods that cannot be placed on an interface, instead of refusing")
	// spiderpool's IPAM switches, read from its spiderpool-conf ConfigMap while it is
	// there; once helm uninstall has deleted it, from these flags.
	gofs := flag.NewFlagSet("switches", flag.ContinueOnError)
	switches.BindFlags(gofs)
	gofs.VisitAll(func(f *flag.Flag) {
		st, _ := ipamconf.SettingOfFlag(f.Name)
		f.Usage = "spiderpool-conf's " + st.Key +
			", for when that ConfigMap is gone (spiderpool uninstalled); when it is there, it is read and this must agree with it"
	})
	cmd.Flags().AddGoFlagSet(gofs)
	out.addFlag(cmd)
	return cmd
}

func printPlan(out *outputFlags, w io.Writer, plan migrate.Plan) error {
	cols := []column{{name: "POOL"}, {name: "STATE"}, {name: "RECORDS"}, {name: "MIGRATE"}, {name: "DROP"}, {name: "UNPLACED"}}
	var rows [][]any
	for _, p := range plan.Pools {
		rows = append(rows, []any{p.Name, p.State, len(p.Entries), p.Count(migrate.Migrate), p.Count(migrate.Drop), p.Count(migrate.Unplaced)})
	}
	if err := out.tabulate(w, cols, rows); err != nil {
		return err
	}
	var notes []string
	for _, p := range plan.Pools {
		for _, e := range p.Entries {
			switch {
			case e.Outcome != migrate.Migrate:
				notes = append(notes, fmt.Sprintf("%s %s %s (UID %s): %s: %s", p.Name, e.Address, e.Pod, e.PodUID, e.Outcome, e.Reason))
			case out.format == outputWide:
				notes = append(notes, fmt.Sprintf("%s %s %s (UID %s): %s on %s (from the %s)", p.Name, e.Address, e.Pod, e.PodUID, e.Outcome, e.Interface, e.Source))
			}
		}
	}
	section(w, "Records", notes)
	section(w, "Pod annotations, written as nicpool's pod webhook would have at creation", podChanges(plan.Pods))
	source := "no " + migrate.SpiderpoolConf + " ConfigMap found: the switches given to this command"
	if plan.Switches.Source != "" {
		source = "read from ConfigMap " + plan.Switches.Source
	}
	var switches []string
	for _, s := range plan.Switches.Settings {
		switches = append(switches, fmt.Sprintf("%s: %t (%s)", s.Key, s.Value, s.Flag))
	}
	section(w, "spiderpool's IPAM switches ("+source+")", switches)
	section(w, "Install nicpool with these switches", plan.Switches.Install())
	section(w, "Blocking", problems(plan.Blockers))
	section(w, "Warnings", problems(plan.Warnings))
	return nil
}

func podChanges(pcs []migrate.PodChange) []string {
	var out []string
	for _, pc := range pcs {
		keys := make([]string, 0, len(pc.Set))
		for k := range pc.Set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, fmt.Sprintf("%s: set %s=%s", pc.Pod, k, pc.Set[k]))
		}
		for _, k := range pc.Remove {
			out = append(out, fmt.Sprintf("%s: remove %s", pc.Pod, k))
		}
	}
	return out
}

func problems(ps []migrate.Problem) []string {
	var out []string
	for _, p := range ps {
		s := p.Message
		if p.Fix != "" {
			s += "\n      fix: " + p.Fix
		}
		out = append(out, s)
	}
	return out
}

func section(w io.Writer, title string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
