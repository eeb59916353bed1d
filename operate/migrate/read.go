package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// Read reads what Decide needs: every pool with spiderpool's string decoded, every
// endpoint and pod, and the reserved addresses; and what admission reads: every
// namespace and NetworkAttachmentDefinition (none when the cluster has no such CRD).
func Read(ctx context.Context, r client.Reader) (Inputs, error) {
	var in Inputs
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(v2beta1.GroupVersion.WithKind("SpiderIPPoolList"))
	if err := r.List(ctx, list); err != nil {
		return in, fmt.Errorf("list SpiderIPPools: %w", err)
	}
	for i := range list.Items {
		p, err := decodePool(&list.Items[i])
		if err != nil {
			return in, err
		}
		in.Pools = append(in.Pools, p)
	}
	var eps v2beta1.SpiderEndpointList
	if err := r.List(ctx, &eps); err != nil {
		return in, fmt.Errorf("list SpiderEndpoints: %w", err)
	}
	in.Endpoints = eps.Items
	var pods corev1.PodList
	if err := r.List(ctx, &pods); err != nil {
		return in, fmt.Errorf("list pods: %w", err)
	}
	in.Pods = pods.Items
	reserved, err := ledger.ReservedSet(ctx, r)
	if err != nil {
		return in, fmt.Errorf("list SpiderReservedIPs: %w", err)
	}
	in.Reserved = reserved
	var namespaces corev1.NamespaceList
	if err := r.List(ctx, &namespaces); err != nil {
		return in, fmt.Errorf("list namespaces: %w", err)
	}
	in.Namespaces = namespaces.Items
	nads := &unstructured.UnstructuredList{}
	nads.SetGroupVersionKind(nadv1.SchemeGroupVersion.WithKind("NetworkAttachmentDefinitionList"))
	switch err := r.List(ctx, nads); {
	case meta.IsNoMatchError(err):
	case err != nil:
		return in, fmt.Errorf("list NetworkAttachmentDefinitions: %w", err)
	default:
		for _, u := range nads.Items {
			var nad nadv1.NetworkAttachmentDefinition
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nad); err != nil {
				return in, fmt.Errorf("network-attachment-definition %s/%s: %w", u.GetNamespace(), u.GetName(), err)
			}
			in.Networks = append(in.Networks, nad)
		}
	}
	return in, nil
}

// decodePool splits a stored pool into nicpool's typed view (without spiderpool's
// string) and the string's records.
func decodePool(u *unstructured.Unstructured) (Pool, error) {
	var p Pool
	raw, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "allocatedIPs")
	s, isString := raw.(string)
	// A string nicpool's pool counter wrote from the pool's blocks is no record to move.
	from, _, _ := unstructured.NestedString(u.Object, "status", "allocatedIPsFrom")
	obj := u
	if found && isString && !strings.HasPrefix(from, v2beta1.AllocatedIPsFromBlocks) {
		obj = u.DeepCopy()
		unstructured.RemoveNestedField(obj.Object, "status", "allocatedIPs")
		p.Records = map[string]Record{}
		if s != "" {
			if err := json.Unmarshal([]byte(s), &p.Records); err != nil {
				p.Unreadable = fmt.Sprintf("status.allocatedIPs is not spiderpool's JSON: %v", err)
			}
		}
	}
	p.Object = &v2beta1.SpiderIPPool{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, p.Object); err != nil {
		return p, fmt.Errorf("pool %s: %w", u.GetName(), err)
	}
	return p, nil
}

// poolReader reads pools with spiderpool's string removed, so that the ledger, which
// reads them typed, works on pools not migrated yet; other kinds pass through.
type poolReader struct{ client.Reader }

func (r poolReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	pool, ok := obj.(*v2beta1.SpiderIPPool)
	if !ok {
		return r.Reader.Get(ctx, key, obj, opts...)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v2beta1.GroupVersion.WithKind("SpiderIPPool"))
	if err := r.Reader.Get(ctx, key, u, opts...); err != nil {
		return err
	}
	p, err := decodePool(u)
	if err != nil {
		return err
	}
	p.Object.DeepCopyInto(pool)
	return nil
}

func (r poolReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pools, ok := list.(*v2beta1.SpiderIPPoolList)
	if !ok {
		return r.Reader.List(ctx, list, opts...)
	}
	u := &unstructured.UnstructuredList{}
	u.SetGroupVersionKind(v2beta1.GroupVersion.WithKind("SpiderIPPoolList"))
	if err := r.Reader.List(ctx, u, opts...); err != nil {
		return err
	}
	pools.Items = nil
	for i := range u.Items {
		p, err := decodePool(&u.Items[i])
		if err != nil {
			return err
		}
		pools.Items = append(pools.Items, *p.Object)
	}
	return nil
}
