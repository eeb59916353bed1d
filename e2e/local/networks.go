package local

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Uplinks are the node interfaces of the two sample networks: eth0 carries the
// cluster network (the pods' eth0), eth1 the secondary network "net1" of
// examples/networks.yaml.
var Uplinks = []string{"eth0", "eth1"}

// The stand-in nodes' Multus attaches every pod's eth0 through the
// NetworkAttachmentDefinition kube-system/cluster (Multus's clusterNetwork), unless
// the pod names its own default network, and ipamd is told so
// (--multus-cluster-network), as spiderpool's chart installs Multus and tells its
// agent (MULTUS_CLUSTER_NETWORK): eth0 is then judged against a pool's
// spec.multusName as a secondary interface is.
const (
	clusterNetworkNamespace = "kube-system"
	clusterNetworkName      = "cluster"
)

// ClusterNetworkNAD is the NetworkAttachmentDefinition of the pods' eth0 on stand-in
// nodes, namespace/name.
const ClusterNetworkNAD = clusterNetworkNamespace + "/" + clusterNetworkName

// clusterNetwork is the CNI configuration of the pods' eth0. Every node's plugins see
// that node's own ipamd socket at the default path (the node stand-in mounts the
// node's run directory there).
func (s *Stack) clusterNetwork() map[string]any {
	return map[string]any{
		"cniVersion": "1.0.0",
		"name":       clusterNetworkName,
		"type":       "macvlan",
		"master":     "eth0",
		"mode":       "bridge",
		"ipam":       map[string]any{"type": "nicpool", "ipam_unix_socket_path": "/run/nicpool/ipamd.sock"},
	}
}

// createClusterNetwork creates the NetworkAttachmentDefinition of the pods' eth0 on
// stand-in nodes (ClusterNetworkNAD), before any node asks Multus for it.
func (s *Stack) createClusterNetwork(ctx context.Context) error {
	config, err := json.Marshal(s.clusterNetwork())
	if err != nil {
		return err
	}
	nad := &unstructured.Unstructured{}
	nad.SetAPIVersion("k8s.cni.cncf.io/v1")
	nad.SetKind("NetworkAttachmentDefinition")
	nad.SetNamespace(clusterNetworkNamespace)
	nad.SetName(clusterNetworkName)
	if err := unstructured.SetNestedField(nad.Object, string(config), "spec", "config"); err != nil {
		return err
	}
	if err := s.Client.Create(ctx, nad); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the cluster network %s: %w", ClusterNetworkNAD, err)
	}
	return nil
}
