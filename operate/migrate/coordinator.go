package migrate

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/coordinator"
	"github.com/nicpool/nicpool/webhook/admission/views"
)

// crdFile is SpiderCoordinator's CRD in nicpool's manifests.
const crdFile = "manifests/base/crds/spiderpool.spidernet.io_spidercoordinators.yaml"

// coordinatorType is the CNI type of spiderpool's coordinator plugin.
const coordinatorType = "coordinator"

// coordinatorProblems says, while networks chain spiderpool's coordinator plugin, what
// nicpool's ipamd would refuse to answer it after the migration (coordinator asks on
// every ADD and DEL: GET /v1/coordinator/config on spiderpool's agent socket, which
// ipamd serves): no SpiderCoordinator CRD, no SpiderCoordinator, one whose spec ipamd
// refuses (coordinator.Check: the rule ipamd answers by), or a cluster that serves no
// networking.k8s.io/v1 ServiceCIDR. Each problem names the networks, the object and
// its fields, and the fix; nothing is said while no network chains coordinator.
// coords are the cluster's SpiderCoordinators; served which of the kinds ipamd reads
// the API server serves (coordinator.Discover, as ipamd asks it).
func coordinatorProblems(nads []nadv1.NetworkAttachmentDefinition, coords []v2beta1.SpiderCoordinator, served coordinator.Served) []Problem {
	var chained []string
	for _, n := range nads {
		if chainsCoordinator(n.Spec.Config) {
			chained = append(chained, qualified(n.Namespace, n.Name))
		}
	}
	if len(chained) == 0 {
		return nil
	}
	sort.Strings(chained)
	networks := fmt.Sprintf("network-attachment-definition %s chains", strings.Join(chained, ", "))
	if len(chained) > 1 {
		networks = fmt.Sprintf("network-attachment-definitions %s chain", strings.Join(chained, ", "))
	}
	networks += " spiderpool's coordinator plugin, which nicpool's ipamd answers (GET " + coordinator.Path + ")"
	var out []Problem
	if !served.SpiderCoordinators {
		return append(out, Problem{
			Message: networks + ", but " + coordinator.NoCRD + ": ipamd would refuse coordinator's every question, and every new pod of these networks would fail its ADD",
			Fix: "install nicpool's CRD alone now (kubectl apply --server-side -f " + crdFile + " of nicpool's source at its release), " +
				"then create the SpiderCoordinator default with spec.podCIDRType none (docs/migrate-from-spiderpool.md); or remove the \"coordinator\" entry from the networks' plugins",
		})
	}
	c := coordinator.Pick(coords)
	if c == nil {
		return append(out, Problem{
			Message: networks + ", but there is no SpiderCoordinator to answer from: every new pod of these networks would fail its ADD",
			Fix:     "create the SpiderCoordinator default with spec.podCIDRType none (docs/migrate-from-spiderpool.md)",
		})
	}
	if !served.ServiceCIDRs {
		out = append(out, Problem{
			Message: networks + ", but the cluster serves no networking.k8s.io/v1 ServiceCIDR (Kubernetes 1.33 and later), where ipamd reads the Service CIDRs coordinator routes through the node: every new pod of these networks would fail its ADD",
			Fix:     "upgrade the cluster to Kubernetes 1.33 or later, or remove the \"coordinator\" entry from the networks' plugins",
		})
	}
	for _, e := range coordinator.Check(c) {
		p := Problem{Message: fmt.Sprintf("%s, but nicpool does not serve spidercoordinator %s: %s; every new pod of these networks would fail its ADD", networks, c.Name, e.Error())}
		if e.Field == "spec.podCIDRType" {
			p.Fix = podCIDRTypeFix(c)
		} else {
			p.Fix = fmt.Sprintf("correct %s (kubectl edit spidercoordinator %s), as spiderpool's webhook would have required", e.Field, c.Name)
		}
		out = append(out, p)
	}
	return out
}

// podCIDRTypeFix is the patch that keeps coordinator's routes to the pod CIDRs
// spiderpool detected (its status.overlayPodCIDR) as hijackCIDR entries, which
// coordinator routes the same way, with podCIDRType none.
func podCIDRTypeFix(c *v2beta1.SpiderCoordinator) string {
	hijack := slices.Clone(c.Spec.HijackCIDR)
	for _, p := range c.Status.OverlayPodCIDR {
		if !slices.Contains(hijack, p) {
			hijack = append(hijack, p)
		}
	}
	if hijack == nil {
		hijack = []string{}
	}
	spec, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDRType": v2beta1.PodCIDRTypeNone, "hijackCIDR": hijack}})
	return fmt.Sprintf("kubectl patch spidercoordinator %s --type merge -p '%s' (the pod CIDRs spiderpool detected, status.overlayPodCIDR, become hijackCIDR entries, which coordinator routes alike; docs/migrate-from-spiderpool.md)", c.Name, spec)
}

// chainsCoordinator reports whether a CNI network configuration (a single plugin or a
// list) has coordinator as one of its plugins. A configuration that does not decode
// runs nothing, coordinator included.
func chainsCoordinator(config string) bool {
	type plugin struct {
		Type string `json:"type"`
	}
	plugins, err := views.ConfigPlugins[plugin](config)
	if err != nil {
		return false
	}
	for _, p := range plugins {
		if p.Type == coordinatorType {
			return true
		}
	}
	return false
}
