package cli

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/operate/inspect"
)

func newWhoCommand(o *options) *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "who ADDRESS",
		Short: "Show the pool, pod, pod UID, interface and node holding an address",
		Example: `  kubectl nicpool who 10.6.0.12
  kubectl nicpool who fd00:6::c -o yaml`,
		Args: cobra.ExactArgs(1),
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
			if out.structured() {
				err = out.print(o.streams.Out, hs)
			} else {
				err = printHoldings(&out, o, hs)
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

func printHoldings(out *output, o *options, hs []inspect.Holding) error {
	cols := []column{{name: "POOL"}, {name: "ADDRESS"}, {name: "POD"}, {name: "POD UID"}, {name: "INTERFACE"}, {name: "NODE"}, {name: "STATE"},
		{name: "BLOCK", wide: true}, {name: "BLOCK NODE", wide: true}, {name: "ENDPOINT", wide: true}}
	var rows [][]any
	for _, h := range hs {
		rows = append(rows, []any{h.Pool, h.Address, h.Pod, h.PodUID, h.Interface, orDash(h.Holder.Node), state(h.Holder),
			orDash(h.Block), orDash(h.BlockNode), agreement(h.Endpoint)})
	}
	return out.table(o.streams.Out, cols, rows)
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
	var out output
	cmd := &cobra.Command{
		Use:   "pod NAME",
		Short: "Show every interface of a pod: network, addresses, pools, gateway, routes, and whether pool records and endpoint agree",
		Example: `  kubectl nicpool pod web-0 -n demo
  kubectl nicpool pod web-0 -n demo -o wide`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			rep, err := inspect.Pod(cmd.Context(), c, ns, args[0], o.now())
			if err != nil {
				return err
			}
			if out.structured() {
				err = out.print(o.streams.Out, rep)
			} else {
				err = printPod(&out, o, rep)
			}
			if err != nil {
				return err
			}
			if !rep.Agrees() {
				return findingf("pod %s/%s: its pool records and its SpiderEndpoint disagree (kubectl nicpool check says how to repair it)", ns, args[0])
			}
			return nil
		},
	}
	out.addFlag(cmd)
	return cmd
}

func printPod(out *output, o *options, rep *inspect.PodReport) error {
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
		if !i.Agrees {
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
	if err := out.table(w, cols, rows); err != nil {
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
	var out output
	cmd := &cobra.Command{
		Use:   "pools",
		Short: "Show every pool's used, free and total addresses, fullest first",
		Example: `  kubectl nicpool pools
  kubectl nicpool pools -o json`,
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
			if out.structured() {
				err = out.print(o.streams.Out, reps)
			} else {
				err = printPools(&out, o, reps)
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

func printPools(out *output, o *options, reps []inspect.PoolReport) error {
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
	return out.table(o.streams.Out, cols, rows)
}

// addressArg reads the ADDRESS argument of who and release.
func addressArg(arg string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(arg)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ADDRESS %q: must be an IPv4 or IPv6 address such as 10.6.0.12: %w", arg, err)
	}
	return addr, nil
}
