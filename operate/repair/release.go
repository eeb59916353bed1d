// Package repair holds what kubectl nicpool writes to repair allocation state, always
// through the ledger (nicpool's one writer of allocation records).
package repair

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/workload"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/operate/inspect"
)

// Decision is what release does with one record of the address.
type Decision struct {
	inspect.Holding
	// Released is true when the record was removed.
	Released bool `json:"released"`
	// Refused says why the record is kept; empty when it may go.
	Refused string `json:"refused,omitempty"`
	// WouldRelease is true, in a dry run, when the record would be removed.
	WouldRelease bool `json:"wouldRelease,omitempty"`
}

// Options change what Release does.
type Options struct {
	// DryRun judges every record and writes nothing.
	DryRun bool
	// Pool, when set, judges and releases only the address's record in that pool:
	// an address recorded in two pools (check's address-in-two-pools) has a record
	// whose pod is gone freed while the other pool's live pod keeps its own.
	Pool string
}

// Release frees addr when no pod can still be using it: each record of the address is
// removed when its pod is gone, has finished, or is terminating past its grace period,
// and is kept, saying why, when its pod is live, still within its grace period, or a
// StatefulSet ordinal that will come back for the address. It writes nothing when any
// record is kept, and through the ledger otherwise, each record only while it still
// names the holder that was judged. It fails with inspect.ErrNotAllocated when no
// record holds addr (in opts.Pool, when set). In a dry run it judges and writes
// nothing.
func Release(ctx context.Context, c client.Client, addr netip.Addr, now time.Time, log logr.Logger, opts Options) ([]Decision, error) {
	hs, err := inspect.Who(ctx, c, addr, now)
	if err != nil {
		return nil, err
	}
	if opts.Pool != "" {
		var inPool []inspect.Holding
		for _, h := range hs {
			if h.Pool == opts.Pool {
				inPool = append(inPool, h)
			}
		}
		if len(inPool) == 0 {
			return nil, fmt.Errorf("%w in pool %s (kubectl nicpool who %s shows its records)", inspect.ErrNotAllocated, opts.Pool, addr)
		}
		hs = inPool
	}
	recs, _, err := ledger.List(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []Decision
	var free []ledger.Record
	refused := false
	for _, h := range hs {
		d := Decision{Holding: h}
		d.Refused, err = refusal(ctx, c, h)
		if err != nil {
			return nil, err
		}
		if d.Refused != "" {
			refused = true
		}
		for _, r := range recs {
			if r.Pool == h.Pool && r.Addr == addr && r.Holder.PodUID == h.PodUID && r.Holder.Interface == h.Interface {
				free = append(free, r)
			}
		}
		out = append(out, d)
	}
	if refused {
		return out, nil
	}
	if opts.DryRun {
		for i := range out {
			out[i].WouldRelease = true
		}
		return out, nil
	}
	l := ledger.New(ledger.Options{Cache: c, Client: c, Fresh: c, Log: log})
	done, err := l.ReleaseRecords(ctx, free)
	for i := range out {
		for _, r := range done {
			if r.Pool == out[i].Pool && r.Holder.PodUID == out[i].PodUID && r.Holder.Interface == out[i].Interface {
				out[i].Released = true
			}
		}
		if !out[i].Released && err == nil {
			out[i].Refused = "the record changed while it was being released (another pod now holds the address): run the command again"
		}
	}
	if err != nil {
		return out, fmt.Errorf("release %s: %w", addr, err)
	}
	pools := map[string]bool{}
	for _, r := range done {
		if !pools[r.Pool] {
			pools[r.Pool] = true
			if err := l.Recount(ctx, r.Pool); err != nil {
				return out, fmt.Errorf("recount pool %s: %w", r.Pool, err)
			}
		}
	}
	return out, nil
}

// refusal says why the holder of a record may still use the address; empty when it
// cannot.
func refusal(ctx context.Context, c client.Reader, h inspect.Holding) (string, error) {
	pod := h.Pod + " (UID " + h.PodUID + ")"
	switch h.Holder.State {
	case inspect.StateLive:
		return fmt.Sprintf("pod %s is live (%s) on node %s and may use %s: delete the pod instead, and nicpool releases the address", pod, h.Holder.Detail, orDash(h.Holder.Node), h.Address), nil
	case inspect.StateTerminating:
		if strings.HasPrefix(h.Holder.Detail, "past its grace period") {
			return "", nil
		}
		return fmt.Sprintf("pod %s is terminating and its containers may still run (%s): wait, then run the command again", pod, h.Holder.Detail), nil
	case inspect.StateFinished:
		return "", nil
	}
	// Gone: unless a StatefulSet brings the ordinal back for its address.
	ns, name, ok := inspect.SplitPod(h.Pod)
	if !ok {
		return "", nil
	}
	ep := &v2beta1.SpiderEndpoint{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ep); err != nil || ep.Status.Current.UID != h.PodUID {
		return "", client.IgnoreNotFound(err)
	}
	set, ok := workload.EndpointStatefulSet(ep)
	if !ok {
		return "", nil
	}
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: set}, sts); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if workload.WillReturn(sts, name) {
		return fmt.Sprintf("StatefulSet %s/%s will recreate pod %s, which keeps %s: scale the StatefulSet below this ordinal first", ns, set, h.Pod, h.Address), nil
	}
	return "", nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
