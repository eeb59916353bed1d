package migrate

import (
	"fmt"
	"sort"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/nicpool/nicpool/webhook/admission/views"
)

// coordinatorType is the CNI type of spiderpool's coordinator plugin.
const coordinatorType = "coordinator"

// coordinatorChains finds the networks whose CNI chain runs spiderpool's coordinator
// plugin. coordinator asks spiderpool's agent for its configuration (GET
// /v1/coordinator/config on the agent's unix socket) on every ADD; nicpool does not
// serve that endpoint in any of coordinator's modes, so after the migration each new
// pod of such a network would fail its ADD. The migration says so before it writes.
func coordinatorChains(nads []nadv1.NetworkAttachmentDefinition) []Problem {
	var out []Problem
	for _, n := range nads {
		if !chainsCoordinator(n.Spec.Config) {
			continue
		}
		out = append(out, Problem{
			Message: fmt.Sprintf("network-attachment-definition %s chains spiderpool's coordinator plugin, which asks spiderpool's agent for its configuration (GET /v1/coordinator/config); nicpool does not serve it in any mode, so every new pod of this network would fail its ADD after the migration", qualified(n.Namespace, n.Name)),
			Fix:     fmt.Sprintf("remove the %q entry from spec.config's plugins of network-attachment-definition %s (kubectl edit network-attachment-definitions -n %s %s); docs/migrate-from-spiderpool.md", coordinatorType, qualified(n.Namespace, n.Name), n.Namespace, n.Name),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Message < out[j].Message })
	return out
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
