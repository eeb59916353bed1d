package annotations

import "strings"

// Multus is how a bare network name reads where the pod's namespace does not apply,
// and which network eth0 is attached through when the pod does not say, as the
// operator configured nicpool (spiderpool reads both the same way, with its own
// namespace where nicpool has its own).
type Multus struct {
	// Namespace is the namespace of a bare name: a bare spec.multusName entry, a bare
	// v1.multus-cni.io/default-network and a bare ClusterNetwork. nicpool's own
	// namespace unless the operator chose another.
	Namespace string
	// ClusterNetwork is the NetworkAttachmentDefinition Multus attaches eth0 through
	// when a pod has no v1.multus-cni.io/default-network (Multus's clusterNetwork);
	// empty when not known.
	ClusterNetwork string
}

// Qualify returns a NetworkAttachmentDefinition name as "namespace/name": a bare name
// is in m.Namespace.
func (m Multus) Qualify(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return m.Namespace + "/" + name
}

// Network returns the NetworkAttachmentDefinition ("namespace/name") through which
// Multus attaches interface iface of a pod, from the pod's annotations alone (what the
// CNI configuration calls itself is its author's choice and never decides): eth0's is
// v1.multus-cni.io/default-network, else the cluster network; another interface's is
// its element of k8s.v1.cni.cncf.io/networks (a bare name there is in the pod's
// namespace, as Multus reads it). "" when none is known or the annotation does not
// parse.
func (m Multus) Network(podAnnotations map[string]string, podNamespace, iface string) string {
	if iface == DefaultInterface {
		if v := strings.TrimSpace(podAnnotations[MultusDefaultNetwork]); v != "" {
			sel, errs := ParseNetworks(v, m.Namespace)
			if len(errs) > 0 || len(sel) == 0 {
				return ""
			}
			return sel[0].Namespace + "/" + sel[0].Name
		}
		if m.ClusterNetwork == "" {
			return ""
		}
		return m.Qualify(m.ClusterNetwork)
	}
	ifs, errs := PodInterfaces(podAnnotations, podNamespace)
	if len(errs) > 0 {
		return ""
	}
	for _, i := range ifs {
		if i.Name == iface {
			return i.Network
		}
	}
	return ""
}
