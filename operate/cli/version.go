package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/version"
)

// The components whose versions `kubectl nicpool version` reads from the cluster: the
// pods' label, the container whose image carries the component, and its name.
var versionedComponents = []struct {
	name, podLabel, list, container string
}{
	{"webhook", "nicpool-webhook", "containers", "webhook"},
	{"ipamd", "nicpool-ipamd", "containers", "ipamd"},
	{"CNI plugin", "nicpool-ipamd", "initContainers", "install-cni"},
}

func newVersionCommand(o *options) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of kubectl nicpool and of the webhook, ipamd and CNI plugin in the cluster",
		Long: `Prints this plugin's version, git revision and Go version, then the versions of
nicpool's webhook, ipamd and CNI plugin running in the cluster, read from the image
tags of their pods (labelled app.kubernetes.io/name=nicpool-webhook and
nicpool-ipamd, in any namespace), with how many pods run each. It warns on standard
error when they differ from one another or from the plugin: docs/install.md says
which versions may run side by side during an upgrade. --client prints the
plugin's version alone, without asking the cluster.`,
		Example: `  kubectl nicpool version
  kubectl nicpool version --client`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := o.streams.Out
			mine := version.Get()
			fmt.Fprintf(w, "Client Version: %s\n", mine)
			if clientOnly {
				return nil
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			found, err := clusterVersions(cmd, c)
			if err != nil {
				return err
			}
			printClusterVersions(w, o.streams.ErrOut, mine.Version, found)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the plugin's own version only; the cluster is not asked")
	return cmd
}

// componentVersions are the versions one component runs, each with its pods'
// namespaces and count.
type componentVersions struct {
	name     string
	versions map[string]int
	places   map[string]bool
}

func clusterVersions(cmd *cobra.Command, c client.Client) ([]componentVersions, error) {
	var out []componentVersions
	pods := map[string][]corev1.Pod{}
	for _, comp := range versionedComponents {
		list, ok := pods[comp.podLabel]
		if !ok {
			var pl corev1.PodList
			if err := c.List(cmd.Context(), &pl, client.MatchingLabels{"app.kubernetes.io/name": comp.podLabel}); err != nil {
				return nil, fmt.Errorf("list the %s pods: %w", comp.podLabel, err)
			}
			list = pl.Items
			pods[comp.podLabel] = list
		}
		cv := componentVersions{name: comp.name, versions: map[string]int{}, places: map[string]bool{}}
		for _, p := range list {
			cs := p.Spec.Containers
			if comp.list == "initContainers" {
				cs = p.Spec.InitContainers
			}
			for _, ctr := range cs {
				if ctr.Name == comp.container {
					cv.versions[ImageVersion(ctr.Image)]++
					cv.places[p.Namespace] = true
				}
			}
		}
		out = append(out, cv)
	}
	return out, nil
}

// ImageVersion is the version an image reference names: its tag (the chart renders
// repository:tag@digest when it pins a digest, and the release tags each image with
// its version), or "unknown" for a reference by digest alone.
func ImageVersion(image string) string {
	ref, _, _ := strings.Cut(image, "@")
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return "unknown"
	}
	return ref[i+1:]
}

func printClusterVersions(w, warn io.Writer, mine string, found []componentVersions) {
	all := map[string]bool{mine: true}
	for _, cv := range found {
		label := strings.ToUpper(cv.name[:1]) + cv.name[1:]
		if len(cv.versions) == 0 {
			fmt.Fprintf(w, "%s Version: not found (no pod in the cluster)\n", label)
			continue
		}
		vs := make([]string, 0, len(cv.versions))
		for v := range cv.versions {
			vs = append(vs, v)
			all[v] = true
		}
		sort.Strings(vs)
		parts := make([]string, len(vs))
		for i, v := range vs {
			parts[i] = fmt.Sprintf("%s (%s)", v, plural(cv.versions[v], "pod"))
		}
		ns := make([]string, 0, len(cv.places))
		for n := range cv.places {
			ns = append(ns, n)
		}
		sort.Strings(ns)
		fmt.Fprintf(w, "%s Version: %s in namespace %s\n", label, strings.Join(parts, ", "), strings.Join(ns, ", "))
	}
	if len(all) > 1 {
		vs := make([]string, 0, len(all))
		for v := range all {
			vs = append(vs, v)
		}
		sort.Strings(vs)
		fmt.Fprintf(warn, "WARNING: version skew: kubectl nicpool and the cluster's nicpool run %s; finish the upgrade (docs/install.md, Version skew) so that every component runs one version\n", strings.Join(vs, ", "))
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
