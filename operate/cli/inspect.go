package cli

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/operate/inspect"
	"github.com/nicpool/nicpool/operate/output"
)

func newWhoCommand(o *options) *cobra.Command {
	out := newOutput()
	cmd := &cobra.Command{
		Use:   "who ADDRESS",
		Short: "Show the pool, pod, pod UID, interface and node holding an address",
		Example: `  kubectl nicpool who 10.6.0.12
  kubectl nicpool who fd00:6::c -o yaml`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeAddresses(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			addr, err := addressArg(args[0])
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			hs, err := inspect.Who(cmd.Context(), c, addr.Unmap(), o.now())
			if errors.Is(err, inspect.ErrNotAllocated) {
				return &Finding{Msg: err.Error()}
			}
			if err != nil {
				return err
			}
			if out.table() {
				err = printHoldings(out, o, hs)
			} else {
				err = out.object(o.streams.Out, holdersList(hs))
			}
			if err != nil {
				return err
			}
			return holdingsFinding(addr, hs)
		},
	}
	out.addFlag(cmd)
	return cmd
}

func printHoldings(out *outputFlags, o *options, hs []inspect.Holding) error {
	cols := []column{{name: "POOL"}, {name: "ADDRESS"}, {name: "POD"}, {name: "POD UID"}, {name: "INTERFACE"}, {name: "NODE"}, {name: "STATE"},
		{name: "BLOCK", wide: true}, {name: "BLOCK NODE", wide: true}, {name: "ENDPOINT", wide: true}}
	var rows [][]any
	for _, h := range hs {
		rows = append(rows, []any{h.Pool, h.Address, h.Pod, h.PodUID, h.Interface, orDash(h.Holder.Node), state(h.Holder),
			orDash(h.Block), orDash(h.BlockNode), agreement(h.Endpoint)})
	}
	return out.tabulate(o.streams.Out, cols, rows)
}

func holdersList(hs []inspect.Holding) runtime.Object {
	items := make([]output.AddressHolder, len(hs))
	for i, h := range hs {
		items[i] = output.AddressHolder{ObjectMeta: metav1.ObjectMeta{Name: h.Address}, Status: h}
	}
	return output.NewList[output.AddressHolder](output.KindAddressHolder, items)
}

// holdingsFinding is what is wrong with the records of one address: more than one, or
// an endpoint that disagrees.
func holdingsFinding(addr netip.Addr, hs []inspect.Holding) error {
	var msgs []string
	if len(hs) > 1 {
		msgs = append(msgs, fmt.Sprintf("%s is recorded %d times", addr, len(hs)))
	}
	for _, h := range hs {
		if h.Endpoint != "" {
			msgs = append(msgs, fmt.Sprintf("%s in pool %s: %s", addr, h.Pool, h.Endpoint))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return &Finding{Msg: strings.Join(msgs, "; ") + " (kubectl nicpool check says how to repair it)"}
}

func state(h inspect.Holder) string {
	if h.Detail == "" {
		return h.State
	}
	return h.State + " (" + h.Detail + ")"
}

func agreement(problem string) string {
	if problem == "" {
		return "agrees"
	}
	return problem
}

func newPodCommand(o *options) *cobra.Command {
	out := newOutput()
	var (
		selector      string
		allNamespaces bool
	)
	cmd := &cobra.Command{
		Use:   "pod [NAME | NAMESPACE/NAME]... | -l SELECTOR | -A",
		Short: "Show every interface of a pod: network, addresses, pools, gateway, routes, and whether pool records and endpoint agree",
		Long: `Shows every interface of each pod named (NAME in --namespace, or NAMESPACE/NAME), or of
every pod that --selector matches in --namespace (with --all-namespaces, in every
namespace): its network, addresses, pools, gateway and routes, from the pod's
SpiderEndpoint and the pool records, and whether the two agree. A pod that is gone is
shown from what is left of it.`,
		Example: `  kubectl nicpool pod web-0 -n demo
  kubectl nicpool pod demo/web-0 -o wide
  kubectl nicpool pod -l app=web -n demo
  kubectl nicpool pod -A -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'`,
		ValidArgsFunction: completePods(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			listing := selector != "" || allNamespaces
			if listing == (len(args) > 0) {
				return errors.New("give pod names (NAME or NAMESPACE/NAME), or --selector or --all-namespaces, not both")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var reps []inspect.PodReport
			if listing {
				if allNamespaces {
					ns = ""
				}
				reps, err = listPodReports(cmd.Context(), c, o, ns, selector)
			} else {
				reps, err = namedPodReports(cmd.Context(), c, o, ns, args)
			}
			if err != nil {
				return err
			}
			if len(reps) > 0 && reps[0].Unchecked != "" {
				fmt.Fprintf(o.streams.ErrOut, "Warning: %s\n", reps[0].Unchecked)
			}
			if out.table() {
				for i := range reps {
					if i > 0 {
						fmt.Fprintln(o.streams.Out)
					}
					if err := printPod(out, o, &reps[i]); err != nil {
						return err
					}
				}
			} else if err := out.object(o.streams.Out, podsList(reps)); err != nil {
				return err
			}
			var bad []string
			for _, rep := range reps {
				if rep.Disagrees() {
					bad = append(bad, rep.Namespace+"/"+rep.Name)
				}
			}
			if len(bad) > 0 {
				return findingf("pod %s: its pool records and its SpiderEndpoint disagree (kubectl nicpool check says how to repair it)", strings.Join(bad, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "the pods whose labels match this selector (e.g. app=web), in --namespace")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "the pods of every namespace (with --selector, those that match)")
	out.addFlag(cmd)
	return cmd
}

// namedPodReports reports each pod arg names: NAME in ns, or NAMESPACE/NAME.
func namedPodReports(ctx context.Context, c client.Reader, o *options, ns string, args []string) ([]inspect.PodReport, error) {
	var reps []inspect.PodReport
	for _, arg := range args {
		pns, name := ns, arg
		if a, b, ok := strings.Cut(arg, "/"); ok {
			pns, name = a, b
		}
		if pns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("pod %q: give NAME (in --namespace) or NAMESPACE/NAME, such as default/web-0", arg)
		}
		rep, err := inspect.Pod(ctx, c, pns, name, o.now())
		if err != nil {
			return nil, err
		}
		reps = append(reps, *rep)
	}
	return reps, nil
}

// listPodReports reports every pod of ns ("" for all) that selector matches.
func listPodReports(ctx context.Context, c client.Reader, o *options, ns, selector string) ([]inspect.PodReport, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("--selector %q: %w", selector, err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	return inspect.Pods(ctx, c, ns, pods.Items, o.now())
}

func podsList(reps []inspect.PodReport) runtime.Object {
	items := make([]output.PodAddresses, len(reps))
	for i, r := range reps {
		items[i] = output.PodAddresses{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Name, UID: types.UID(r.UID)}, Status: r}
	}
	return output.NewList[output.PodAddresses](output.KindPodAddresses, items)
}

func printPod(out *outputFlags, o *options, rep *inspect.PodReport) error {
	w := o.streams.Out
	fmt.Fprintf(w, "Pod %s/%s  UID %s  node %s  %s\n\n", rep.Namespace, rep.Name, rep.UID, orDash(rep.Holder.Node), state(rep.Holder))
	cols := []column{{name: "INTERFACE"}, {name: "NETWORK"}, {name: "FAMILY"}, {name: "ADDRESS"}, {name: "POOL"}, {name: "GATEWAY"}, {name: "ROUTES"}, {name: "AGREES"},
		{name: "BLOCK", wide: true}, {name: "CLEAN GATEWAY", wide: true}}
	var rows [][]any
	for _, i := range rep.Interfaces {
		network := i.Network
		if i.Interface == "eth0" && network == "" {
			network = "(cluster network)"
		}
		agrees := "yes"
		switch {
		case rep.Unchecked != "":
			agrees = "unchecked"
		case !i.Agrees:
			agrees = "NO"
		}
		if len(i.Addresses) == 0 {
			rows = append(rows, []any{i.Interface, orDash(network), "-", "-", "-", "-", routes(i.Routes), agrees, "-", strconv.FormatBool(i.CleanGateway)})
		}
		for _, a := range i.Addresses {
			rows = append(rows, []any{i.Interface, orDash(network), "IPv" + strconv.FormatInt(a.Family, 10), a.Address, a.Pool, orDash(a.Gateway), routes(i.Routes), agrees,
				orDash(a.Block), strconv.FormatBool(i.CleanGateway)})
		}
	}
	if err := out.tabulate(w, cols, rows); err != nil {
		return err
	}
	var problems []string
	problems = append(problems, rep.Problems...)
	for _, i := range rep.Interfaces {
		for _, p := range i.Problems {
			problems = append(problems, i.Interface+": "+p)
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(w, "\nDisagreements:\n")
		for _, p := range problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	return nil
}

func routes(rs []v2beta1.Route) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, r.Dst+" via "+r.Gw)
	}
	return orDash(strings.Join(parts, ", "))
}

func newPoolsCommand(o *options) *cobra.Command {
	out := newOutput()
	cmd := &cobra.Command{
		Use:   "pools",
		Short: "Show every pool's used, free and total addresses, fullest first",
		Example: `  kubectl nicpool pools
  kubectl nicpool pools -o json
  kubectl nicpool pools -o jsonpath='{.items[0].metadata.name}'
  kubectl nicpool pools -o custom-columns=POOL:.metadata.name,FREE:.status.free`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			reps, err := inspect.Pools(cmd.Context(), c)
			if err != nil {
				return err
			}
			if out.table() {
				err = printPools(out, o, reps)
			} else {
				err = out.object(o.streams.Out, poolsList(reps))
			}
			if err != nil {
				return err
			}
			var bad []string
			for _, p := range reps {
				if p.Error != "" {
					bad = append(bad, p.Error)
				}
			}
			if len(bad) > 0 {
				return findingf("%s", strings.Join(bad, "; "))
			}
			return nil
		},
	}
	out.addFlag(cmd)
	return cmd
}

func printPools(out *outputFlags, o *options, reps []inspect.PoolReport) error {
	cols := []column{{name: "NAME"}, {name: "SUBNET"}, {name: "USED"}, {name: "FREE"}, {name: "TOTAL"}, {name: "RESERVED"}, {name: "DEFAULT"}, {name: "TERMINATING"}, {name: "AFFINITY"},
		{name: "FAMILY", wide: true}, {name: "DISABLED", wide: true}, {name: "FREE %", wide: true}}
	var rows [][]any
	for _, p := range reps {
		free := "-"
		if p.Total > 0 {
			free = strconv.FormatInt(p.Free*100/p.Total, 10) + "%"
		}
		family := "-"
		if p.Family != 0 {
			family = "IPv" + strconv.FormatInt(p.Family, 10)
		}
		rows = append(rows, []any{p.Name, p.Subnet, p.Used, p.Free, p.Total, p.Reserved, strconv.FormatBool(p.Default), strconv.FormatBool(p.Terminating), orDash(p.Affinity),
			family, strconv.FormatBool(p.Disabled), free})
	}
	return out.tabulate(o.streams.Out, cols, rows)
}

func poolsList(reps []inspect.PoolReport) runtime.Object {
	items := make([]output.PoolUsage, len(reps))
	for i, r := range reps {
		items[i] = output.PoolUsage{ObjectMeta: metav1.ObjectMeta{Name: r.Name}, Status: r}
	}
	return output.NewList[output.PoolUsage](output.KindPoolUsage, items)
}

// addressArg reads the ADDRESS argument of who and release.
func addressArg(arg string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(arg)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ADDRESS %q: must be an IPv4 or IPv6 address such as 10.6.0.12: %w", arg, err)
	}
	return addr, nil
}
