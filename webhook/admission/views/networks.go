package views

import (
	"context"
	"encoding/json"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// IPAMTypes are the IPAM plugin types that are nicpool: the names its plugin is
// installed under (cniplugin.Name and cniplugin.NameSpiderpool, which a test holds
// equal; spelled out so that the webhook does not link the CNI plugin's code).
var IPAMTypes = []string{"nicpool", "spiderpool"}

// Networks knows of each NetworkAttachmentDefinition whether nicpool is its IPAM, so
// that admission can tell which of a pod's interfaces nicpool will be asked to serve.
type Networks struct {
	view[bool]
}

// NewNetworks returns an empty view.
func NewNetworks() *Networks {
	return &Networks{view: newView[bool]()}
}

// Register feeds the view from the cache's NetworkAttachmentDefinition informer.
func (v *Networks) Register(ctx context.Context, informers cache.Informers) error {
	synced, err := watch(ctx, informers, &nadv1.NetworkAttachmentDefinition{}, v.Set, v.remove)
	v.synced = synced
	return err
}

// Set records a NetworkAttachmentDefinition.
func (v *Networks) Set(nad *nadv1.NetworkAttachmentDefinition) {
	v.put(key(nad.Namespace, nad.Name), UsesNicpool(nad.Spec.Config))
}

// UsesNicpool reports whether the network "namespace/name" is known and has nicpool
// as its IPAM.
func (v *Networks) UsesNicpool(network string) bool {
	uses, _ := v.get(network)
	return uses
}

// UsesNicpool reports whether a CNI network configuration (a single plugin or a list)
// names nicpool as the IPAM of one of its plugins.
func UsesNicpool(config string) bool {
	type plugin struct {
		IPAM struct {
			Type string `json:"type"`
		} `json:"ipam"`
	}
	plugins, err := ConfigPlugins[plugin](config)
	if err != nil {
		return false
	}
	for _, p := range plugins {
		for _, t := range IPAMTypes {
			if p.IPAM.Type == t {
				return true
			}
		}
	}
	return false
}

// ConfigPlugins decodes a CNI network configuration, a single plugin or a list, into
// its plugins, each as a T (the single form is the configuration itself).
func ConfigPlugins[T any](config string) ([]T, error) {
	var conf struct {
		Plugins []T `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(config), &conf); err != nil {
		return nil, err
	}
	var single T
	if err := json.Unmarshal([]byte(config), &single); err != nil {
		return nil, err
	}
	return append(conf.Plugins, single), nil
}
