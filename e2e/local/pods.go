package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// PodInterface is one interface of a pod as Multus reported it, with the pools its
// addresses came from.
type PodInterface struct {
	Pod       string
	Node      string
	Phase     corev1.PodPhase
	Interface string
	Network   string
	IPs       []string
	Pools     []string
}

// PodInterfaces lists every interface of the pods in namespace (all when empty), from
// Multus' network-status annotation and the pools' allocation records.
func (s *Stack) PodInterfaces(ctx context.Context, namespace string) ([]PodInterface, error) {
	pods := &corev1.PodList{}
	if err := s.Client.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	owner, err := s.poolOfAddress(ctx)
	if err != nil {
		return nil, err
	}
	var out []PodInterface
	for _, p := range pods.Items {
		statuses, _ := NetworkStatus(&p)
		if len(statuses) == 0 {
			out = append(out, PodInterface{Pod: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName, Phase: p.Status.Phase})
			continue
		}
		for _, st := range statuses {
			pi := PodInterface{Pod: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName, Phase: p.Status.Phase, Interface: st.Interface, Network: st.Name, IPs: st.IPs}
			for _, ip := range st.IPs {
				if pool, ok := owner[ip]; ok {
					pi.Pools = append(pi.Pools, pool)
				}
			}
			out = append(out, pi)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out, nil
}

// NetworkStatus decodes Multus' network-status annotation of a pod.
func NetworkStatus(p *corev1.Pod) ([]nadv1.NetworkStatus, error) {
	raw, ok := p.Annotations[annotations.MultusNetworkStatus]
	if !ok {
		return nil, nil
	}
	var st []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return nil, fmt.Errorf("pod %s/%s: %s: %w", p.Namespace, p.Name, annotations.MultusNetworkStatus, err)
	}
	return st, nil
}

func (s *Stack) poolOfAddress(ctx context.Context) (map[string]string, error) {
	recs, _, err := ledger.List(ctx, s.Client)
	if err != nil {
		return nil, err
	}
	owner := map[string]string{}
	for _, r := range recs {
		owner[r.Addr.String()] = r.Pool
	}
	return owner, nil
}

// PrintPodInterfaces writes the interfaces as a table.
func PrintPodInterfaces(w io.Writer, rows []PodInterface) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "POD\tNODE\tSTATUS\tINTERFACE\tNETWORK\tADDRESSES\tPOOLS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Pod, r.Node, r.Phase, dash(r.Interface), dash(r.Network),
			dash(strings.Join(r.IPs, ",")), dash(strings.Join(r.Pools, ",")))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
