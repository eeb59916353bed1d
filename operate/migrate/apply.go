package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// ErrBlocked refuses to apply a plan that has blockers.
var ErrBlocked = errors.New("the migration is blocked")

// Run reads the cluster, checks it and decides the plan: what --dry-run shows and
// --apply carries out. Beside the pools' records, the plan holds the annotations that
// nicpool's pod webhook would have written on each running pod, decided by the
// webhook's own admission decision over what was read. disc says which kinds the API
// server serves.
func Run(ctx context.Context, r client.Reader, disc discovery.ServerResourcesInterface, opts Options) (Plan, error) {
	in, err := Read(ctx, r)
	if err != nil {
		return Plan{}, err
	}
	plan := Decide(in, opts)
	sw, swBlockers, err := ReadSwitches(ctx, r, opts.Switches, opts.SwitchesGiven)
	if err != nil {
		return Plan{}, err
	}
	plan.Switches = sw
	plan.Blockers = append(plan.Blockers, swBlockers...)
	plan.admitter = newAdmitter(in, sw.switches)
	var podWarnings []Problem
	plan.Pods, podWarnings = plan.admitter.resolvePods(ctx, in.Pods)
	plan.Warnings = append(plan.Warnings, podWarnings...)
	blockers, warnings, err := Preflight(ctx, r, disc, in)
	if err != nil {
		return Plan{}, err
	}
	plan.Blockers = append(blockers, plan.Blockers...)
	plan.Warnings = append(plan.Warnings, warnings...)
	return plan, nil
}

// Apply carries a plan out, unless it has blockers: it installs nicpool's CRDs (over
// spiderpool's, which have the same names: the stored objects stay), then, pool by
// pool, writes the placed records through the ledger and retires spiderpool's string,
// on the condition that the pool did not change since the plan was read; then it
// writes each planned pod's annotations (decided again on the pod as it is then). It
// is idempotent: a pool whose string is gone is done, and a pod whose annotations are
// resolved has nothing to change, so a run that stopped half way is finished by the
// next.
func Apply(ctx context.Context, c client.Client, plan Plan, log logr.Logger) error {
	if len(plan.Blockers) > 0 {
		return fmt.Errorf("%w: %d problems to deal with first", ErrBlocked, len(plan.Blockers))
	}
	if err := InstallCRDs(ctx, c, log); err != nil {
		return err
	}
	w := &writer{c: c, log: log, ledgers: map[string]*ledger.Ledger{}}
	for _, pp := range plan.Pools {
		if pp.State != PoolPending {
			continue
		}
		if err := applyPool(ctx, c, w, pp, log); err != nil {
			return fmt.Errorf("pool %s: %w", pp.Name, err)
		}
	}
	if len(plan.Pods) > 0 && plan.admitter == nil {
		return errors.New("the plan has pod annotations to write but no admission decision: make it with Run")
	}
	for _, pc := range plan.Pods {
		if err := plan.admitter.applyPod(ctx, c, pc, log); err != nil {
			return fmt.Errorf("pod %s: %w", pc.Pod, err)
		}
	}
	return nil
}

// writer hands out the ledgers the migration writes through: one per node, as a
// ledger creates the blocks it writes for its own node.
type writer struct {
	c       client.Client
	log     logr.Logger
	ledgers map[string]*ledger.Ledger
}

func (w *writer) ledger(node string) *ledger.Ledger {
	l := w.ledgers[node]
	if l == nil {
		reader := poolReader{w.c}
		l = ledger.New(ledger.Options{Node: node, Cache: reader, Client: w.c, Fresh: reader, Log: w.log})
		w.ledgers[node] = l
	}
	return l
}

func applyPool(ctx context.Context, c client.Client, w *writer, pp PoolPlan, log logr.Logger) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v2beta1.GroupVersion.WithKind("SpiderIPPool"))
	if err := c.Get(ctx, client.ObjectKey{Name: pp.Name}, u); err != nil {
		return err
	}
	p, err := decodePool(u)
	if err != nil {
		return err
	}
	if p.Records == nil {
		return nil // done by an earlier run
	}
	if changed := changedSince(pp, p.Records); changed != "" {
		return fmt.Errorf("it changed since the plan was made (%s): nothing of it was written; run the migration again", changed)
	}
	subnet, err := netip.ParsePrefix(p.Object.Spec.Subnet)
	if err != nil {
		return fmt.Errorf("spec.subnet %q: %w", p.Object.Spec.Subnet, err)
	}
	placed := pp.PlacedByBlock(subnet)
	// Every block first, so that an address nicpool already records for another pod
	// refuses the pool before any of its records is written.
	all := v2beta1.PoolIPAllocations{}
	for _, pl := range placed {
		maps.Copy(all, pl.Records)
	}
	if err := w.ledger("").HeldByOthers(ctx, p.Object, all); err != nil {
		return fmt.Errorf("nothing of it was written: %w", err)
	}
	for _, pl := range placed {
		if err := w.ledger(pl.Node).Import(ctx, p.Object, pl.Records); err != nil {
			return fmt.Errorf("write its records: %w", err)
		}
	}
	// Retire the string only if nothing wrote the pool meanwhile.
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": u.GetResourceVersion()},
		"status":   map[string]any{"allocatedIPs": nil},
	})
	if err := c.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("it changed while its records were written: run the migration again (what is written stays): %w", err)
		}
		return fmt.Errorf("remove spiderpool's status.allocatedIPs: %w", err)
	}
	if err := w.ledger("").Recount(ctx, pp.Name); err != nil {
		return err
	}
	log.Info("migrated", "pool", pp.Name, "records", pp.Count(Migrate), "dropped", pp.Count(Drop))
	return nil
}

// changedSince compares the records of spiderpool's string as they are now with the
// ones the plan decided on, record by record, and says what differs ("" when nothing
// does): a count alone misses an address given to another pod.
func changedSince(pp PoolPlan, now map[string]Record) string {
	var diffs []string
	planned := make(map[string]Entry, len(pp.Entries))
	for _, e := range pp.Entries {
		planned[e.Address] = e
	}
	for _, e := range pp.Entries {
		rec, ok := now[e.Address]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s of pod %s was released", e.Address, e.Pod))
		case rec.Pod != e.Pod || rec.PodUID != e.PodUID:
			diffs = append(diffs, fmt.Sprintf("%s is now pod %s's (UID %s), planned for pod %s (UID %s)", e.Address, rec.Pod, rec.PodUID, e.Pod, e.PodUID))
		}
	}
	for addr, rec := range now {
		if _, ok := planned[addr]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s was given to pod %s", addr, rec.Pod))
		}
	}
	sort.Strings(diffs)
	const most = 5
	if len(diffs) > most {
		diffs = append(diffs[:most], fmt.Sprintf("%d more", len(diffs)-most))
	}
	return strings.Join(diffs, "; ")
}

// fieldManager names the writer of what the migration writes.
const fieldManager = "kubectl-nicpool"

// InstallCRDs creates nicpool's CRDs, or replaces the definitions of the same names
// (spiderpool's) in place, never deleting one: deleting a CRD deletes its objects.
// It returns once every CRD serves.
func InstallCRDs(ctx context.Context, c client.Client, log logr.Logger) error {
	defs, err := crds.Definitions()
	if err != nil {
		return err
	}
	for _, def := range defs {
		cur := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: def.Name}, cur)
		switch {
		case apierrors.IsNotFound(err):
			if err := c.Create(ctx, def.DeepCopy(), client.FieldOwner(fieldManager)); err != nil {
				return fmt.Errorf("create CRD %s: %w", def.Name, err)
			}
			log.Info("installed CRD", "crd", def.Name)
		case err != nil:
			return fmt.Errorf("read CRD %s: %w", def.Name, err)
		default:
			upd := cur.DeepCopy()
			upd.Spec = def.Spec
			upd.Labels, upd.Annotations = def.Labels, def.Annotations
			if err := c.Update(ctx, upd, client.FieldOwner(fieldManager)); err != nil {
				return fmt.Errorf("replace CRD %s with nicpool's (status.storedVersions %v must all be served by it): %w", def.Name, cur.Status.StoredVersions, err)
			}
			log.Info("replaced CRD with nicpool's", "crd", def.Name)
		}
	}
	for _, def := range defs {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			cur := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: def.Name}, cur); err != nil {
				return false, err
			}
			for _, cond := range cur.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return cur.Status.ObservedGeneration == 0 || cur.Status.ObservedGeneration >= cur.Generation, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s is not established: %w", def.Name, err)
		}
	}
	return nil
}
