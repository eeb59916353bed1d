package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/operate/inspect"
	"github.com/nicpool/nicpool/operate/output"
	"github.com/nicpool/nicpool/operate/repair"
)

func newReleaseCommand(o *options) *cobra.Command {
	var (
		out         = newOutput()
		force       bool
		dryRun      bool
		reports     []string
		minInterval time.Duration
		pool        string
	)
	cmd := &cobra.Command{
		Use:   "release (ADDRESS [--pool POOL] | --from-report REPORT...) --force",
		Short: "Free an address whose holder is gone, finished, or terminating past its grace period",
		Long: `Removes the allocation record of ADDRESS, through nicpool's ledger, when no pod can
still use the address: its pod is gone, has finished, or is terminating past its grace
period (for example on a node that is down, where nicpool's garbage collector keeps
the addresses of terminating pods). It refuses, writing nothing and saying why, while
the pod is live, within its grace period, or a StatefulSet ordinal that will come back
for the address. --force is required: the address is freed without the CNI plugin
removing it from the pod's interface. --dry-run says what it would do and writes
nothing. --pool judges and releases only the address's record in that pool: for an
address recorded in two pools, the record whose pod is gone is freed while the
other pool's live pod keeps its own.

--from-report reads reports of kubectl nicpool check -o json and releases every
address that every report, and a check run now, find held by a pod that is gone,
provided the earliest report is --min-interval older than now: an address a record
holds for a moment while its pod starts or stops is in one report, not in all. Each
is released in the pool the reports name.`,
		Example: `  kubectl nicpool release 10.6.0.12 --force
  kubectl nicpool release 10.6.0.12 --dry-run
  kubectl nicpool check -o json > report.json
  # … at least --min-interval later:
  kubectl nicpool release --from-report report.json --dry-run
  kubectl nicpool release --from-report report.json --force`,
		ValidArgsFunction: completeAddresses(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if (len(reports) > 0) == (len(args) > 0) || len(args) > 1 {
				return errors.New("give one ADDRESS, or --from-report REPORT (not both)")
			}
			if pool != "" && len(reports) > 0 {
				return errors.New("--pool goes with ADDRESS; --from-report releases each address in the pool the reports name")
			}
			var addrs []pooledAddr
			if len(args) == 1 {
				addr, err := addressArg(args[0])
				if err != nil {
					return err
				}
				addrs = append(addrs, pooledAddr{addr.Unmap(), pool})
			}
			if !force && !dryRun {
				what := "the addresses of the reports"
				if len(addrs) == 1 {
					what = addrs[0].addr.String()
				}
				return fmt.Errorf("release frees %s without the CNI plugin removing it from an interface: give --force, or --dry-run to see what it would do (kubectl nicpool who ADDRESS shows a holder)", what)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			if len(reports) > 0 {
				if addrs, err = fromReports(cmd, o, reports, minInterval); err != nil {
					return err
				}
				if len(addrs) == 0 {
					fmt.Fprintln(o.streams.ErrOut, "Nothing to release: no address of a gone pod is in every report and in a check now.")
				}
			}
			var all []repair.Decision
			var why []string
			for _, pa := range addrs {
				addr := pa.addr
				ds, err := repair.Release(cmd.Context(), c, addr, o.now(), logr.Discard(), repair.Options{DryRun: dryRun, Pool: pa.pool})
				if errors.Is(err, inspect.ErrNotAllocated) {
					if len(addrs) == 1 {
						return &Finding{Msg: err.Error()}
					}
					why = append(why, err.Error())
					continue
				}
				all = append(all, ds...)
				if err != nil {
					return err
				}
				for _, d := range ds {
					if d.Refused != "" {
						why = append(why, fmt.Sprintf("%s in pool %s: %s", addr, d.Pool, d.Refused))
					}
				}
			}
			if !out.table() {
				if err := out.object(o.streams.Out, decisionsList(all)); err != nil {
					return err
				}
			} else {
				for _, d := range all {
					switch {
					case d.Released:
						fmt.Fprintf(o.streams.Out, "released %s of pool %s, held by pod %s (UID %s) interface %s (%s)\n", d.Address, d.Pool, d.Pod, d.PodUID, d.Interface, state(d.Holder))
					case d.WouldRelease:
						fmt.Fprintf(o.streams.Out, "would release %s of pool %s, held by pod %s (UID %s) interface %s (%s)\n", d.Address, d.Pool, d.Pod, d.PodUID, d.Interface, state(d.Holder))
					}
				}
			}
			if len(why) > 0 {
				if len(addrs) == 1 {
					for i := range why {
						why[i] = strings.TrimPrefix(why[i], addrs[0].addr.String()+" in ")
					}
					return findingf("refused to release %s, nothing was written: %s", addrs[0].addr, strings.Join(why, "; "))
				}
				return findingf("refused, writing nothing for these: %s", strings.Join(why, "; "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "free the address (required, unless --dry-run)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be released and what refused; write nothing")
	cmd.Flags().StringArrayVar(&reports, "from-report", nil, "a report of kubectl nicpool check -o json (repeat for more): release what every report and a check now find held by a gone pod")
	cmd.Flags().DurationVar(&minInterval, "min-interval", 5*time.Minute, "with --from-report: how much older than now the earliest report must be")
	cmd.Flags().StringVar(&pool, "pool", "", "judge and release only the address's record in this pool (an address recorded in two pools)")
	_ = cmd.RegisterFlagCompletionFunc("pool", completePools(o))
	out.addFlag(cmd)
	return cmd
}

// pooledAddr is an address to release, in pool when it is set.
type pooledAddr struct {
	addr netip.Addr
	pool string
}

// fromReports returns the addresses every report and a check run now find held by a
// pod that is gone (RecordGone, matched by the violation's name), each with its pool.
func fromReports(cmd *cobra.Command, o *options, paths []string, minInterval time.Duration) ([]pooledAddr, error) {
	now := o.now()
	earliest := now
	var seen map[string]int
	for i, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--from-report: %w", err)
		}
		var list output.ViolationList
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, fmt.Errorf("--from-report %s: not a report of kubectl nicpool check -o json: %w", p, err)
		}
		if list.APIVersion != output.GroupVersion.String() || list.Kind != output.KindViolation+"List" {
			return nil, fmt.Errorf("--from-report %s: apiVersion %q kind %q: want %s %sList, as kubectl nicpool check -o json prints", p, list.APIVersion, list.Kind, output.GroupVersion, output.KindViolation)
		}
		names := map[string]bool{}
		for _, v := range list.Items {
			if v.Status.Kind != invariants.RecordGone {
				continue
			}
			names[v.Name] = true
			if t := v.CreationTimestamp.Time; !t.IsZero() && t.Before(earliest) {
				earliest = t
			}
		}
		if i == 0 {
			seen = map[string]int{}
		}
		for n := range names {
			seen[n]++
		}
	}
	if len(seen) > 0 && now.Sub(earliest) < minInterval {
		return nil, fmt.Errorf("--from-report: the earliest report is %s old, less than --min-interval %s: take it again later, so that an address held only while its pod starts or stops is not in every report", now.Sub(earliest).Round(time.Second), minInterval)
	}
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	vs, err := invariants.Violations(cmd.Context(), c, invariants.Options{Converged: true})
	if err != nil {
		return nil, err
	}
	var addrs []pooledAddr
	for _, v := range vs {
		if v.Kind == invariants.RecordGone && seen[violationName(v)] == len(paths) {
			addrs = append(addrs, pooledAddr{v.Address, v.Pool})
		}
	}
	sort.Slice(addrs, func(i, j int) bool {
		if addrs[i].addr != addrs[j].addr {
			return addrs[i].addr.Less(addrs[j].addr)
		}
		return addrs[i].pool < addrs[j].pool
	})
	return addrs, nil
}

func decisionsList(ds []repair.Decision) runtime.Object {
	items := make([]output.ReleaseDecision, len(ds))
	for i, d := range ds {
		items[i] = output.ReleaseDecision{ObjectMeta: metav1.ObjectMeta{Name: d.Address}, Status: d}
	}
	return output.NewList[output.ReleaseDecision](output.KindReleaseDecision, items)
}
