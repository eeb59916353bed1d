package annotations

import "testing"

// Which NetworkAttachmentDefinition attaches an interface is read from the pod's
// annotations as Multus reads them; nothing a NAD's author writes decides it.
func TestMultusNetwork(t *testing.T) {
	m := Multus{Namespace: "nicpool-system", ClusterNetwork: "cluster"}
	tests := []struct {
		name   string
		multus Multus
		annos  map[string]string
		iface  string
		want   string
	}{
		{name: "eth0, the cluster network, bare", multus: m, iface: "eth0", want: "nicpool-system/cluster"},
		{name: "eth0, the cluster network, namespaced", multus: Multus{Namespace: "nicpool-system", ClusterNetwork: "kube-system/k8s-pod-network"}, iface: "eth0", want: "kube-system/k8s-pod-network"},
		{name: "eth0, no cluster network", multus: Multus{Namespace: "nicpool-system"}, iface: "eth0", want: ""},
		{name: "eth0, default-network bare", multus: m, annos: map[string]string{MultusDefaultNetwork: "calico"}, iface: "eth0", want: "nicpool-system/calico"},
		{name: "eth0, default-network namespaced", multus: m, annos: map[string]string{MultusDefaultNetwork: "team-a/underlay"}, iface: "eth0", want: "team-a/underlay"},
		{name: "eth0, default-network JSON", multus: m, annos: map[string]string{MultusDefaultNetwork: `[{"name":"underlay","namespace":"team-a"}]`}, iface: "eth0", want: "team-a/underlay"},
		{name: "eth0, default-network that does not parse", multus: m, annos: map[string]string{MultusDefaultNetwork: "a/b/c"}, iface: "eth0", want: ""},
		{name: "net1 by position, bare: the pod's namespace", multus: m, annos: map[string]string{MultusNetworks: "prodnet"}, iface: "net1", want: "tenant-b/prodnet"},
		{name: "named interface", multus: m, annos: map[string]string{MultusNetworks: "a, nicpool-system/prodnet@data"}, iface: "data", want: "nicpool-system/prodnet"},
		{name: "interface the pod does not have", multus: m, annos: map[string]string{MultusNetworks: "prodnet"}, iface: "net2", want: ""},
		{name: "networks that do not parse", multus: m, annos: map[string]string{MultusNetworks: "[{"}, iface: "net1", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.multus.Network(tt.annos, "tenant-b", tt.iface); got != tt.want {
				t.Errorf("Network = %q, want %q", got, tt.want)
			}
		})
	}
}
