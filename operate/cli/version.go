package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/operate/inspect"
	"github.com/nicpool/nicpool/operate/output"
	"github.com/nicpool/nicpool/version"
)

func newVersionCommand(o *options) *cobra.Command {
	var clientOnly bool
	out := newOutput()
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of kubectl nicpool and of the webhook, ipamd and CNI plugin in the cluster",
		Long: `Prints this plugin's version, git revision and Go version, then the versions of
nicpool's webhook, ipamd and CNI plugin in the cluster:

- the webhook's, as the replica the API server calls reports it: a dry-run
  SpiderIPPool create (it writes nothing; it needs the right to create
  SpiderIPPools) that the webhook answers with its build;
- each node's ipamd's, from the version label of its heartbeat Lease;
- every component's image tags, from its pods (labelled app.kubernetes.io/name
  nicpool-webhook or nicpool-ipamd, in any namespace), with how many pods run each.

It warns on standard error when they differ from one another or from the plugin:
docs/install.md says which versions may run side by side during an upgrade.
--client prints the plugin's version alone, without asking the cluster. -o json or
yaml prints a ComponentVersionList.`,
		Example: `  kubectl nicpool version
  kubectl nicpool version --client
  kubectl nicpool version -o jsonpath='{.items[?(@.metadata.name=="webhook")].status.running[0].version}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			mine := version.Get()
			var found []inspect.ComponentVersions
			if clientOnly {
				found = []inspect.ComponentVersions{{Component: inspect.VersionClient, Running: []inspect.RunningVersion{{
					Version: mine.Version, Revision: mine.Revision, GoVersion: mine.GoVersion, Source: inspect.SourceClient}}}}
			} else {
				cfg, err := o.restConfig()
				if err != nil {
					return err
				}
				c, err := o.client()
				if err != nil {
					return err
				}
				if found, err = inspect.Versions(cmd.Context(), c, cfg, o.now()); err != nil {
					return err
				}
			}
			if !out.table() {
				items := make([]output.ComponentVersion, len(found))
				for i, cv := range found {
					items[i] = output.ComponentVersion{ObjectMeta: metav1.ObjectMeta{Name: cv.Component}, Status: cv}
				}
				if err := out.object(o.streams.Out, output.NewList[output.ComponentVersion](output.KindComponentVersion, items)); err != nil {
					return err
				}
			} else {
				printVersions(o.streams.Out, found)
			}
			warnSkew(o.streams.ErrOut, found)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the plugin's own version only; the cluster is not asked")
	out.addFlag(cmd)
	return cmd
}

// componentLabels are how the lines name each component.
var componentLabels = map[string]string{
	inspect.VersionClient:  "Client",
	inspect.VersionWebhook: "Webhook",
	inspect.VersionIpamd:   "Ipamd",
	inspect.VersionCNI:     "CNI plugin",
}

// printVersions prints one line per component, as kubectl version does: what its
// processes report, then what its pods' images name.
func printVersions(w io.Writer, found []inspect.ComponentVersions) {
	for _, cv := range found {
		var parts []string
		for _, r := range cv.Running {
			switch r.Source {
			case inspect.SourceClient:
				parts = append(parts, version.Info{Version: r.Version, Revision: r.Revision, GoVersion: r.GoVersion}.String())
			case inspect.SourceAdmission:
				parts = append(parts, version.Info{Version: r.Version, Revision: r.Revision, GoVersion: r.GoVersion}.String()+", the replica the API server calls")
			case inspect.SourceHeartbeat:
				parts = append(parts, fmt.Sprintf("%s on %s %s", r.Version, inspect.Plural(len(r.Nodes), "node"), strings.Join(r.Nodes, ", ")))
			}
		}
		if len(cv.Images) > 0 {
			tags := make([]string, len(cv.Images))
			places := map[string]bool{}
			for i, im := range cv.Images {
				tags[i] = fmt.Sprintf("%s (%s)", im.Version, inspect.Plural(im.Pods, "pod"))
				for _, ns := range im.Namespaces {
					places[ns] = true
				}
			}
			ns := make([]string, 0, len(places))
			for n := range places {
				ns = append(ns, n)
			}
			sort.Strings(ns)
			images := fmt.Sprintf("%s in namespace %s", strings.Join(tags, ", "), strings.Join(ns, ", "))
			if len(parts) > 0 {
				images = "images " + images
			}
			parts = append(parts, images)
		}
		line := strings.Join(parts, "; ")
		if line == "" {
			line = "not found (no pod in the cluster)"
			if len(cv.Unread) > 0 {
				line = "not found (no pod in the cluster; " + strings.Join(cv.Unread, "; ") + ")"
			}
		}
		fmt.Fprintf(w, "%s Version: %s\n", componentLabels[cv.Component], line)
	}
}

// warnSkew warns when the versions found differ.
func warnSkew(w io.Writer, found []inspect.ComponentVersions) {
	all := map[string]bool{}
	for _, cv := range found {
		for _, r := range cv.Running {
			// Heartbeats carry the version as a label value: compare in that form.
			all[version.Label(r.Version)] = true
		}
		for _, im := range cv.Images {
			all[version.Label(im.Version)] = true
		}
	}
	if len(all) > 1 {
		vs := make([]string, 0, len(all))
		for v := range all {
			vs = append(vs, v)
		}
		sort.Strings(vs)
		fmt.Fprintf(w, "WARNING: version skew: kubectl nicpool and the cluster's nicpool run %s; finish the upgrade (docs/install.md, Version skew) so that every component runs one version\n", strings.Join(vs, ", "))
	}
}
