package cli

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// CompletionShim is the name kubectl (1.26 and later) looks for on PATH to complete a
// plugin's arguments: `kubectl nicpool <TAB>` runs `kubectl_complete-nicpool
// __complete …`. The plugin's binary, run under that name (a link to it), answers
// as `kubectl-nicpool __complete …` does.
const CompletionShim = "kubectl_complete-nicpool"

// maxCompletions bounds what one completion lists: a shell shows no more usefully.
const maxCompletions = 500

// completePods completes NAME in --namespace, or NAMESPACE/NAME once a slash is typed.
func completePods(o *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := o.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		ns, prefix := "", ""
		if a, _, ok := strings.Cut(toComplete, "/"); ok {
			ns, prefix = a, a+"/"
		} else if ns, err = o.namespace(); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var pods corev1.PodList
		if err := c.List(cmd.Context(), &pods, client.InNamespace(ns), client.Limit(maxCompletions)); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, p := range pods.Items {
			if name := prefix + p.Name; strings.HasPrefix(name, toComplete) {
				out = append(out, name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeAddresses completes an allocated address, from the pool records.
func completeAddresses(o *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := o.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		recs, _, err := ledger.List(cmd.Context(), c)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, r := range recs {
			a := r.Addr.String()
			if strings.HasPrefix(a, toComplete) {
				out = append(out, cobra.CompletionWithDesc(a, r.Pool+" "+r.Holder.Pod+" "+r.Holder.Interface))
			}
		}
		slices.Sort(out)
		if len(out) > maxCompletions {
			out = out[:maxCompletions]
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNamespaces completes --namespace.
func completeNamespaces(o *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := o.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var nss corev1.NamespaceList
		if err := c.List(cmd.Context(), &nss, client.Limit(maxCompletions)); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, n := range nss.Items {
			if strings.HasPrefix(n.Name, toComplete) {
				out = append(out, n.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completePools completes a pool's name (release --pool), with its subnet.
func completePools(o *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := o.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var pools v2beta1.SpiderIPPoolList
		if err := c.List(cmd.Context(), &pools, client.Limit(maxCompletions)); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, p := range pools.Items {
			if strings.HasPrefix(p.Name, toComplete) {
				out = append(out, cobra.CompletionWithDesc(p.Name, p.Spec.Subnet))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
