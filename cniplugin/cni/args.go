package cni

import (
	"fmt"
	"strings"

	"github.com/nicpool/nicpool/ipamd/api"
)

// The CNI_ARGS keys Kubernetes runtimes pass for a pod sandbox.
const (
	argPodNamespace = "K8S_POD_NAMESPACE"
	argPodName      = "K8S_POD_NAME"
	argPodUID       = "K8S_POD_UID"
	argInfraID      = "K8S_POD_INFRA_CONTAINER_ID"
)

// PodArgs is the pod identity a runtime passes in CNI_ARGS.
type PodArgs struct {
	Pod              api.Pod
	InfraContainerID string
}

// ParseArgs reads CNI_ARGS ("K1=V1;K2=V2"). Keys it does not know are ignored whatever
// IgnoreUnknown says: runtimes add their own keys and an IPAM plugin has no reason to
// fail on them.
func ParseArgs(cniArgs string) (PodArgs, error) {
	var a PodArgs
	if cniArgs == "" {
		return a, nil
	}
	for i, pair := range strings.Split(cniArgs, ";") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return PodArgs{}, fmt.Errorf("CNI_ARGS element %d (%q) is not KEY=VALUE: separate pairs with ';'", i, pair)
		}
		switch k {
		case argPodNamespace:
			a.Pod.Namespace = v
		case argPodName:
			a.Pod.Name = v
		case argPodUID:
			a.Pod.UID = v
		case argInfraID:
			a.InfraContainerID = v
		}
	}
	return a, nil
}

// requirePod says what is missing for ipamd to find the pod.
func (a PodArgs) requirePod() error {
	var missing []string
	if a.Pod.Namespace == "" {
		missing = append(missing, argPodNamespace)
	}
	if a.Pod.Name == "" {
		missing = append(missing, argPodName)
	}
	if len(missing) > 0 {
		return fmt.Errorf("CNI_ARGS lacks %s: nicpool allocates for Kubernetes pods, so the runtime must pass the pod's identity (kubelet's CRI runtimes do)", strings.Join(missing, " and "))
	}
	return nil
}
