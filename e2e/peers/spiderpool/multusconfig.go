package spiderpool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// SpiderMultusConfig is spiderpool's way of writing a NetworkAttachmentDefinition: its
// controller generates one of the same namespace and name from each. nicpool does not
// serve the kind (a migrated cluster keeps the generated NADs and edits them directly,
// docs/migrate-from-spiderpool.md), so the specs that create one would wait for a NAD
// that never comes. The harness stands in for that controller, for the one CNI type
// the IPAM specs use (macvlan): it installs spiderpool's SpiderMultusConfig CRD from
// spiderpool's module, and turns each SpiderMultusConfig into the NAD spiderpool's
// controller would generate, with nicpool as its IPAM (the spiderpoolConfigPools as
// its default pools) and without spiderpool's coordinator plugin, as the fixture
// networks of fixtures.yaml are. Only the NAD is under test: which pools an interface
// attached through it draws from, and whether a pool's multusName admits it.

var (
	multusConfigGVK = schema.GroupVersionKind{Group: "spiderpool.spidernet.io", Version: "v2beta1", Kind: "SpiderMultusConfig"}
	nadGVK          = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}
)

// installMultusConfigCRD creates (or updates) spiderpool's SpiderMultusConfig CRD, read
// from spiderpool's module as this module requires it.
func installMultusConfigCRD(ctx context.Context, c client.Client) error {
	out, err := exec.CommandContext(ctx, goTool(), "list", "-m", "-f", "{{.Dir}}", "github.com/spidernet-io/spiderpool").Output()
	if err != nil {
		return fmt.Errorf("locate spiderpool's module: %w", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "charts", "spiderpool", "crds", "spiderpool.spidernet.io_spidermultusconfigs.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := c.Patch(ctx, crd, client.Apply, client.FieldOwner("spiderpool-e2e"), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply spiderpool's SpiderMultusConfig CRD: %w", err)
	}
	// Served once Established.
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(crd.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKey{Name: crd.GetName()}, got); err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cond := range conds {
			if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", crd.GetName(), err)
	}
	return nil
}

// serveMultusConfigs turns SpiderMultusConfigs into NADs until ctx ends, as soon as
// one is created or changed (a watch, as spiderpool's controller reacts to them: a spec
// changes a SpiderMultusConfig and then at once restarts the pods using it); logf
// reports what it could not turn.
func serveMultusConfigs(ctx context.Context, c client.WithWatch, logf func(string, ...any)) {
	reported := map[string]string{}
	apply := func(smc *unstructured.Unstructured) {
		key := smc.GetNamespace() + "/" + smc.GetName()
		if smc.GetDeletionTimestamp() != nil {
			return
		}
		msg := ""
		if err := applyNetwork(ctx, c, smc); err != nil {
			msg = err.Error()
		}
		if msg != reported[key] && msg != "" && ctx.Err() == nil {
			logf("SpiderMultusConfig %s: %s", key, msg)
		}
		reported[key] = msg
	}
	for ctx.Err() == nil {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(multusConfigGVK.GroupVersion().WithKind(multusConfigGVK.Kind + "List"))
		w, err := c.Watch(ctx, list)
		if err != nil {
			if ctx.Err() == nil {
				logf("watch SpiderMultusConfigs: %v", err)
			}
			select { // the API server may be restarting: watch again in a second
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range w.ResultChan() {
			if smc, ok := ev.Object.(*unstructured.Unstructured); ok && (ev.Type == "ADDED" || ev.Type == "MODIFIED") {
				apply(smc)
			}
		}
		w.Stop()
	}
}

// macvlanConfig is the part of a SpiderMultusConfig's spec the stand-in reads.
type macvlanConfig struct {
	CniType       string `json:"cniType"`
	MacvlanConfig *struct {
		Master []string `json:"master"`
		VlanID *int32   `json:"vlanID"`
		Pools  *struct {
			IPv4 []string `json:"ipv4"`
			IPv6 []string `json:"ipv6"`
		} `json:"ippools"`
	} `json:"macvlan"`
}

// applyNetwork writes the NAD of one SpiderMultusConfig, owned by it (deleting the
// SpiderMultusConfig, or its namespace, deletes the NAD, as with spiderpool's).
func applyNetwork(ctx context.Context, c client.Client, smc *unstructured.Unstructured) error {
	raw, err := json.Marshal(smc.Object["spec"])
	if err != nil {
		return err
	}
	var spec macvlanConfig
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	if spec.CniType != "macvlan" || spec.MacvlanConfig == nil || len(spec.MacvlanConfig.Master) != 1 {
		return fmt.Errorf("cniType %q: the harness turns macvlan configurations with one master only", spec.CniType)
	}
	if spec.MacvlanConfig.VlanID != nil && *spec.MacvlanConfig.VlanID != 0 {
		return fmt.Errorf("vlanID %d: the local stack's nodes have no VLANs", *spec.MacvlanConfig.VlanID)
	}
	ipam := map[string]any{"type": "nicpool"}
	if p := spec.MacvlanConfig.Pools; p != nil {
		if len(p.IPv4) > 0 {
			ipam["default_ipv4_ippool"] = p.IPv4
		}
		if len(p.IPv6) > 0 {
			ipam["default_ipv6_ippool"] = p.IPv6
		}
	}
	conf, err := json.Marshal(map[string]any{
		"cniVersion": "1.0.0",
		"name":       smc.GetName(),
		"plugins":    []any{map[string]any{"type": "macvlan", "master": spec.MacvlanConfig.Master[0], "mode": "bridge", "ipam": ipam}},
	})
	if err != nil {
		return err
	}
	nad := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"config": string(conf)}}}
	nad.SetGroupVersionKind(nadGVK)
	nad.SetNamespace(smc.GetNamespace())
	nad.SetName(smc.GetName())
	nad.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: multusConfigGVK.GroupVersion().String(), Kind: multusConfigGVK.Kind,
		Name: smc.GetName(), UID: smc.GetUID(), Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
	}})
	err = c.Patch(ctx, nad, client.Apply, client.FieldOwner("spiderpool-e2e-multusconfig"), client.ForceOwnership)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the namespace or the SpiderMultusConfig went meanwhile; the next round sees it
	}
	return err
}

func ptrTo[T any](v T) *T { return &v }

// fixedPools are the pools spiderpool's specs create under a fixed name (ippoolcr's
// D00017, "large-ipv6-pool"). A run that failed such a spec skips its cleanup (as
// spiderpool's specs do on failure), and on a local cluster left up, the next run's
// create fails with "already exists": the harness removes them before the suites run.
var fixedPools = []string{"large-ipv6-pool"}

// removeLeftovers deletes the fixed-name pools a previous run left and waits until
// they are gone (a pool still holding addresses goes once its pods have).
func removeLeftovers(ctx context.Context, c client.Client) error {
	for _, name := range fixedPools {
		pool := &unstructured.Unstructured{}
		pool.SetGroupVersionKind(schema.GroupVersionKind{Group: "spiderpool.spidernet.io", Version: "v2beta1", Kind: "SpiderIPPool"})
		pool.SetName(name)
		if err := c.Delete(ctx, pool); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the previous run's pool %s: %w", name, err)
		}
		var last error
		err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			last = c.Get(ctx, client.ObjectKey{Name: name}, pool)
			return apierrors.IsNotFound(last), nil
		})
		if err != nil {
			return fmt.Errorf("the previous run's pool %s is still there after 5 minutes (%v): delete what holds its addresses", name, last)
		}
	}
	return nil
}
