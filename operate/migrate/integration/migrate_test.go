package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/docs"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/daemon"
	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/operate/inspect"
)

const appNS = "app"

// world is what spiderpool left: pods, their sandboxes, and the addresses each
// interface has.
type world struct {
	pods map[string]*corev1.Pod
	// web's sandbox, where its net1 carries its spiderpool addresses.
	webNetNS ns.NetNS
	// addresses each pod interface must keep: "pod/interface" → addresses.
	keep map[string][]string
}

func TestMigrateFromSpiderpool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := suite.env.Client
	w := spiderpoolWorld(t)
	before := podAnnotations(t)
	dir0 := t.TempDir()

	t.Log("a dry run while spiderpool runs: it names what blocks, and writes nothing")
	out, errOut, code := kubectl(t, "migrate", "from-spiderpool", "--dry-run")
	t.Logf("kubectl nicpool migrate from-spiderpool --dry-run\n%s%s", out, errOut)
	g.Expect(code).To(Equal(1))
	for _, want := range []string{
		"spiderpool-agent still runs: pod kube-system/spiderpool-agent-x7k2p on node node-1",
		"spiderpool's webhook spiderippool.spiderpool.spidernet.io of ValidatingWebhookConfiguration spiderpool-controller is still registered",
		"network-attachment-definition app/macvlan is owned by SpiderMultusConfig macvlan",
		`fix: kubectl patch network-attachment-definition -n app macvlan --type json -p '[{"op":"remove","path":"/metadata/ownerReferences"}]'`,
		"v4 10.50.0.12 app/web (UID " + string(w.pods["web"].UID) + "): unplaced: no SpiderEndpoint lists it and the pool record names no interface",
		"eth0-pool 10.51.0.12 app/old (UID 0d1e-gone): drop: no SpiderEndpoint lists it and the pool record names no interface; pod UID 0d1e-gone is gone",
		"1 SpiderMultusConfig objects: nicpool does not serve SpiderMultusConfigs",
		`app/web: set ipam.spidernet.io/ippools=[{"interface":"eth0","ipv4":["eth0-pool"]},{"interface":"net1","ipv4":["v4"],"ipv6":["v6"]}]`,
		`app/single: set ipam.spidernet.io/ippools=[{"interface":"eth0","ipv4":["eth0-pool"]}]`,
		"app/db-0: set ipam.nicpool.io/endpoint-uid=" + endpointUID(t, "db-0"),
		"pod app/stray: nicpool's admission would refuse it (",
		"gone-pool",
		"fix: correct its owner's pod template, then, once nicpool runs: kubectl delete pod -n app stray",
		"network-attachment-definition app/macvlan-coordinator chains spiderpool's coordinator plugin, which nicpool's ipamd answers (GET /v1/coordinator/config), but nicpool does not serve spidercoordinator default: spec.podCIDRType",
		`fix: kubectl patch spidercoordinator default --type merge -p '{"spec":{"hijackCIDR":["169.254.0.0/16","10.244.0.0/16"],"podCIDRType":"none"}}'`,
	} {
		g.Expect(out).To(ContainSubstring(want))
	}
	g.Expect(out).NotTo(ContainSubstring("app/macvlan chains"), "a network without coordinator blocks nothing")
	g.Expect(out).NotTo(ContainSubstring("app/plain:"), "a pod without pool annotations keeps its annotations: its namespace's defaults serve it")

	t.Log("the SpiderCoordinator patched as the dry run says: coordinator keeps its routes, and blocks no more")
	shell(t, dir0, `kubectl patch spidercoordinator default --type merge -p '{"spec":{"hijackCIDR":["169.254.0.0/16","10.244.0.0/16"],"podCIDRType":"none"}}'`)
	out, _, _ = kubectl(t, "migrate", "from-spiderpool", "--dry-run")
	g.Expect(out).NotTo(ContainSubstring("spec.podCIDRType"))
	if servesServiceCIDRs(t) {
		g.Expect(out).NotTo(ContainSubstring("coordinator"))
	} else {
		// Kubernetes before 1.33 (make test-floor's 1.31): ipamd would have no Service
		// CIDRs to tell coordinator, and the dry run says so; the network goes, as its fix
		// says, so that the migration can go on.
		g.Expect(out).To(ContainSubstring("app/macvlan-coordinator chains spiderpool's coordinator plugin, which nicpool's ipamd answers (GET /v1/coordinator/config), but the cluster serves no networking.k8s.io/v1 ServiceCIDR"))
		coordNAD := &unstructured.Unstructured{}
		coordNAD.SetGroupVersionKind(schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"})
		coordNAD.SetNamespace(appNS)
		coordNAD.SetName("macvlan-coordinator")
		g.Expect(c.Delete(ctx, coordNAD)).To(Succeed())
	}

	t.Log("the runbook's backup holds spiderpool's records")
	dir := dir0
	shell(t, dir, "kubectl get spiderippools,spiderendpoints,spiderreservedips -A -o yaml > spiderpool-backup.yaml")
	backup, err := os.ReadFile(filepath.Join(dir, "spiderpool-backup.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(backup)).To(ContainSubstring(spiderpoolString(t, "v4")[:20]), "the pools' string status")
	g.Expect(string(backup)).To(ContainSubstring("kind: SpiderEndpoint"))

	_, errOut, code = kubectl(t, "migrate", "from-spiderpool", "--apply")
	g.Expect(code).To(Equal(1))
	g.Expect(errOut).To(ContainSubstring("problems block the migration (refused; nothing was written)"))
	g.Expect(spiderpoolString(t, "v4")).To(ContainSubstring("10.50.0.12"), "a refused --apply writes nothing")
	err = c.Get(ctx, client.ObjectKey{Name: "ipblocks.ipam.nicpool.io"}, &apiextensionsv1.CustomResourceDefinition{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a refused --apply installs no CRD: %v", err)
	g.Expect(podAnnotations(t)).To(Equal(before), "a dry run and a refused --apply change no pod")

	t.Log("spiderpool uninstalled as the runbook says: its pods and webhooks gone, the NAD freed of its owner")
	uninstallSpiderpool(t)
	out = shell(t, dir, "kubectl get crd spiderippools.spiderpool.spidernet.io spiderendpoints.spiderpool.spidernet.io spiderreservedips.spiderpool.spidernet.io")
	g.Expect(out).To(ContainSubstring("spiderreservedips.spiderpool.spidernet.io"))
	out = shell(t, dir, "kubectl get spiderippools")
	g.Expect(out).To(MatchRegexp(`(?m)^eth0-pool\s`))
	_, _, code = kubectl(t, "migrate", "from-spiderpool", "--dry-run")
	g.Expect(code).To(Equal(1), "the leaked record of the running pod web still blocks")
	out, errOut, code = kubectl(t, "migrate", "from-spiderpool", "--apply", "--drop-unplaced")
	t.Logf("kubectl nicpool migrate from-spiderpool --apply --drop-unplaced\n%s%s", out, errOut)
	g.Expect(code).To(Equal(0), "stdout %s\nstderr %s", out, errOut)

	t.Log("run again, as after an interruption: nothing left to do")
	out, _, code = kubectl(t, "migrate", "from-spiderpool", "--apply")
	g.Expect(code).To(Equal(0))
	g.Expect(out).To(MatchRegexp(`eth0-pool\s+done`))
	g.Expect(out).NotTo(ContainSubstring("Pod annotations"), "every pod's selection is resolved already")

	t.Log("the pods' annotations are what nicpool's webhook would have written; stray's are untouched")
	after := podAnnotations(t)
	g.Expect(after["web"]).To(HaveKeyWithValue(annotations.IPPools, `[{"interface":"eth0","ipv4":["eth0-pool"]},{"interface":"net1","ipv4":["v4"],"ipv6":["v6"]}]`))
	g.Expect(after["single"]).To(HaveKeyWithValue(annotations.IPPools, `[{"interface":"eth0","ipv4":["eth0-pool"]}]`))
	g.Expect(after["single"]).To(HaveKeyWithValue(annotations.IPPool, `{"interface":"eth0","ipv4":["eth0-pool"]}`), "ippool stays beside the eth0 entry it was turned into")
	g.Expect(after["db-0"]).To(HaveKeyWithValue(annotations.EndpointUID, endpointUID(t, "db-0")))
	g.Expect(after["plain"]).To(Equal(before["plain"]))
	g.Expect(after["stray"]).To(Equal(before["stray"]))

	t.Log("nicpool's form: every address on its interface, read through the typed API")
	recs, bad, err := ledger.List(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bad).To(BeEmpty())
	var got []string
	for _, r := range recs {
		g.Expect(r.Block).NotTo(BeEmpty(), "record %s is in an IPBlock", r.Addr)
		g.Expect(r.Node).To(Equal(nodeName), "record %s is in a block of its pod's node, where that node's ipamd looks", r.Addr)
		got = append(got, fmt.Sprintf("%s %s %s/%s %s", r.Pool, r.Addr, r.Holder.Pod, r.Holder.PodUID, r.Holder.Interface))
	}
	uid := func(name string) string { return string(w.pods[name].UID) }
	g.Expect(got).To(ConsistOf(
		"eth0-pool 10.51.0.10 app/web/"+uid("web")+" eth0",
		"eth0-pool 10.51.0.11 app/single/"+uid("single")+" eth0",
		"eth0-pool 10.51.0.13 app/plain/"+uid("plain")+" eth0",
		"v4 10.50.0.10 app/web/"+uid("web")+" net1",
		"v4 10.50.0.11 app/db-0/"+uid("db-0")+" net1",
		"v6 fd00:50::10 app/web/"+uid("web")+" net1",
	))
	// Each pool's allocatedIPs is spiderpool's string again, now written from the
	// blocks (allocatedIPsFrom says so): the records it lists are the migrated ones,
	// and no longer spiderpool's records waiting for a migration.
	wantStatus := map[string]map[string]v2beta1.AllocatedIP{}
	for _, r := range recs {
		if wantStatus[r.Pool] == nil {
			wantStatus[r.Pool] = map[string]v2beta1.AllocatedIP{}
		}
		wantStatus[r.Pool][r.Addr.String()] = v2beta1.AllocatedIP{Pod: r.Holder.Pod, PodUID: r.Holder.PodUID}
	}
	for pool, n := range map[string]int64{"eth0-pool": 3, "v4": 2, "v6": 1} {
		p := &v2beta1.SpiderIPPool{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: pool}, p)).To(Succeed())
		g.Expect(p.Status.AllocatedIPsFrom).To(Equal(v2beta1.AllocatedIPsFromBlocks), "pool %s allocatedIPsFrom", pool)
		g.Expect(p.Status.SpiderpoolRecords()).To(BeFalse(), "pool %s still holds records to migrate", pool)
		g.Expect(p.Status.AllocatedIPs).NotTo(BeNil(), "pool %s allocatedIPs", pool)
		var listed map[string]v2beta1.AllocatedIP
		g.Expect(json.Unmarshal([]byte(*p.Status.AllocatedIPs), &listed)).To(Succeed(), "pool %s allocatedIPs is spiderpool's JSON string", pool)
		g.Expect(listed).To(Equal(wantStatus[pool]), "pool %s allocatedIPs", pool)
		g.Expect(p.Status.AllocatedIPCount).To(Equal(ptr.To(n)), "pool %s allocatedIPCount", pool)
	}

	t.Log("ipamd starts; every pod keeps every address, and ipamd answers its next ADD from the selection the migration resolved")
	startIPAMD(t)
	ipam := api.NewClient(filepath.Join(suite.runDir, filepath.Base(api.DefaultSocketPath)), 10*time.Second)
	for key, want := range w.keep {
		name, iface, _ := strings.Cut(key, "/")
		pod := w.pods[name]
		var resp *api.AllocateResponse
		g.Eventually(func() (err error) {
			resp, err = ipam.Allocate(ctx, &api.AllocateRequest{
				Attachment: api.Attachment{ContainerID: "c-" + name, Interface: iface},
				Pod:        api.Pod{Namespace: appNS, Name: name, UID: string(pod.UID)},
				Network:    api.NetworkConfig{Name: "macvlan"},
			})
			return err
		}).WithTimeout(time.Minute).Should(Succeed(), "ADD again for %s", key)
		var addrs []string
		for _, ip := range resp.IPs {
			addrs = append(addrs, ip.Address)
		}
		g.Expect(addrs).To(ConsistOf(want), "the addresses of %s", key)
	}
	for name := range w.pods {
		out, _, code := kubectl(t, "pod", name, "-n", appNS)
		g.Expect(code).To(Equal(0), "kubectl nicpool pod %s: pool records and endpoint agree\n%s", name, out)
	}
	g.Expect(invariants.Check(ctx, c, invariants.Options{Converged: true})).To(Succeed())
	_, _, code = kubectl(t, "check")
	g.Expect(code).To(Equal(0))
	out, _, code = kubectl(t, "pools")
	g.Expect(code).To(Equal(0))
	g.Expect(out).To(MatchRegexp(`(?m)^v4\s+10\.50\.0\.0/24\s+2\s+39\s+41\s`))

	t.Log("the runtime tears web's net1 down with the configuration Multus cached under spiderpool")
	delThroughSpiderpool(t, w)
	g.Expect(hasLink(t, w.webNetNS, "net1")).To(BeFalse(), "macvlan removed the interface")
	for _, a := range []string{"10.50.0.10", "fd00:50::10"} {
		_, errOut, code := kubectl(t, "who", a)
		g.Expect(code).To(Equal(1), "%s released", a)
		g.Expect(errOut).To(ContainSubstring("not allocated"))
	}
	var list struct {
		Items []struct{ Status inspect.PodReport }
	}
	out, _, code = kubectl(t, "pod", "web", "-n", appNS, "-o", "json")
	g.Expect(code).To(Equal(0))
	g.Expect(json.Unmarshal([]byte(out), &list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	rep := list.Items[0].Status
	g.Expect(rep.Interfaces).To(HaveLen(2))
	g.Expect(rep.Interfaces[0].Addresses).To(HaveLen(1), "eth0 keeps its address")
	g.Expect(rep.Interfaces[1].Addresses).To(BeEmpty(), "net1 holds nothing")
	g.Expect(invariants.Check(ctx, c, invariants.Options{Converged: true})).To(Succeed())
	_, _, code = kubectl(t, "check")
	g.Expect(code).To(Equal(0))

	t.Log("the CRDs of the kinds nicpool does not serve go; the NAD and nicpool's objects stay")
	shell(t, dir, "kubectl delete crd spidersubnets.spiderpool.spidernet.io spidermultusconfigs.spiderpool.spidernet.io")
	nad := &unstructured.Unstructured{}
	nad.SetGroupVersionKind(schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"})
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: appNS, Name: "macvlan"}, nad)).To(Succeed())
	g.Expect(nad.GetOwnerReferences()).To(BeEmpty())
	_, _, code = kubectl(t, "check")
	g.Expect(code).To(Equal(0))

	t.Log("the runbook's kubectl commands are the ones this test ran")
	doc := runbookCommands(t)
	g.Expect(ran).To(ContainElements(doc), "every command of the runbook ran")
	for _, cmd := range ran {
		if strings.HasPrefix(cmd, "kubectl nicpool migrate ") || !strings.HasPrefix(cmd, "kubectl nicpool ") {
			g.Expect(doc).To(ContainElement(cmd), "the runbook shows every migration command and every plain kubectl command the test ran")
		}
	}
}

// servesServiceCIDRs reports whether the API server serves networking.k8s.io/v1
// ServiceCIDRs (Kubernetes 1.33 and later).
func servesServiceCIDRs(t *testing.T) bool {
	t.Helper()
	ok, err := suite.env.Serves(networkingv1.SchemeGroupVersion, "servicecidrs")
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// spiderpoolWorld creates what a cluster running spiderpool holds: three pools with
// spiderpool's string records (some without interface, one of a pod long gone, one
// leaked), three running pods with their endpoints, a StatefulSet, spiderpool's agent
// and webhook, and a NAD owned by a SpiderMultusConfig.
func spiderpoolWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	c := suite.env.Client
	g := NewWithT(t)
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS,
		Annotations: map[string]string{annotations.NamespaceDefaultIPv4Pool: `["eth0-pool"]`}}})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})).To(Succeed())

	smc := &unstructured.Unstructured{}
	smc.SetGroupVersionKind(v2beta1.GroupVersion.WithKind("SpiderMultusConfig"))
	smc.SetNamespace(appNS)
	smc.SetName("macvlan")
	smc.Object["spec"] = map[string]any{"cniType": "macvlan", "macvlan": map[string]any{"master": []any{parent}}}
	g.Expect(c.Create(ctx, smc)).To(Succeed())
	nad := &unstructured.Unstructured{}
	nad.SetGroupVersionKind(schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"})
	nad.SetNamespace(appNS)
	nad.SetName("macvlan")
	nad.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "spiderpool.spidernet.io/v2beta1", Kind: "SpiderMultusConfig", Name: "macvlan", UID: smc.GetUID(), Controller: ptr.To(true)}})
	nad.Object["spec"] = map[string]any{"config": networkConfig()}
	g.Expect(c.Create(ctx, nad)).To(Succeed())
	// A network that chains spiderpool's coordinator, and the SpiderCoordinator
	// spiderpool's chart creates, as its controller left it.
	coordNAD := &unstructured.Unstructured{}
	coordNAD.SetGroupVersionKind(nad.GroupVersionKind())
	coordNAD.SetNamespace(appNS)
	coordNAD.SetName("macvlan-coordinator")
	coordNAD.Object["spec"] = map[string]any{"config": `{"cniVersion":"0.3.1","name":"macvlan-coordinator","plugins":[{"type":"macvlan","master":"` + parent + `","ipam":{"type":"spiderpool"}},{"type":"coordinator"}]}`}
	g.Expect(c.Create(ctx, coordNAD)).To(Succeed())
	coord := &unstructured.Unstructured{}
	coord.SetGroupVersionKind(v2beta1.GroupVersion.WithKind("SpiderCoordinator"))
	coord.SetName("default")
	coord.Object["spec"] = map[string]any{"mode": "auto", "podCIDRType": "auto", "hijackCIDR": []any{"169.254.0.0/16"}, "tunePodRoutes": true, "hostRuleTable": int64(500), "podRPFilter": int64(0), "txQueueLen": int64(0)}
	coord.Object["status"] = map[string]any{"phase": "Synced", "overlayPodCIDR": []any{"10.244.0.0/16"}, "serviceCIDR": []any{"10.96.0.0/12"}}
	g.Expect(c.Create(ctx, coord)).To(Succeed())

	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	g.Expect(c.Create(ctx, set)).To(Succeed())

	w := &world{pods: map[string]*corev1.Pod{}, keep: map[string][]string{
		"web/eth0":    {"10.51.0.10/24"},
		"web/net1":    {"10.50.0.10/24", "fd00:50::10/64"},
		"db-0/net1":   {"10.50.0.11/24"},
		"single/eth0": {"10.51.0.11/24"},
		"plain/eth0":  {"10.51.0.13/24"},
	}}
	// web: two interfaces, pools listed by position (no interface names), as most
	// spiderpool users write them.
	w.pods["web"] = runningPod(t, "web", map[string]string{
		annotations.MultusNetworks: appNS + "/macvlan",
		annotations.IPPools:        `[{"ipv4":["eth0-pool"]},{"ipv4":["v4"],"ipv6":["v6"]}]`,
	}, nil)
	// db-0: a StatefulSet pod, its pools named by interface; its eth0 is the cluster
	// network's, with an IPAM of its own.
	w.pods["db-0"] = runningPod(t, "db-0", map[string]string{
		annotations.MultusNetworks: appNS + "/macvlan",
		annotations.IPPools:        `[{"interface":"net1","ipv4":["v4"]}]`,
	}, []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: set.UID, Controller: ptr.To(true)}})
	// single: one interface chosen with ipam.spidernet.io/ippool; its endpoint lost.
	// With the "interface" key spiderpool ignores and its own e2e suite writes.
	w.pods["single"] = runningPod(t, "single", map[string]string{annotations.IPPool: `{"interface":"eth0","ipv4":["eth0-pool"]}`}, nil)
	// plain: no pool annotation; its namespace's default pool serves it.
	w.pods["plain"] = runningPod(t, "plain", nil, nil)
	// stray: names a pool that does not exist (spiderpool failed its ADD; it has no
	// address): admission would refuse it, so the migration leaves it as it is.
	runningPod(t, "stray", map[string]string{annotations.IPPools: `[{"ipv4":["gone-pool"]}]`}, nil)

	uid := func(name string) string { return string(w.pods[name].UID) }
	spiderpoolPool(t, "eth0-pool", "10.51.0.0/24", "10.51.0.1", "10.51.0.10-10.51.0.50", map[string]map[string]string{
		"10.51.0.10": {"pod": "app/web", "podUid": uid("web")},
		"10.51.0.11": {"pod": "app/single", "podUid": uid("single")},
		"10.51.0.12": {"pod": "app/old", "podUid": "0d1e-gone"},
		"10.51.0.13": {"pod": "app/plain", "podUid": uid("plain")},
	})
	spiderpoolPool(t, "v4", "10.50.0.0/24", "10.50.0.1", "10.50.0.10-10.50.0.50", map[string]map[string]string{
		"10.50.0.10": {"pod": "app/web", "podUid": uid("web")},
		"10.50.0.11": {"pod": "app/db-0", "podUid": uid("db-0"), "interface": "net1"},
		"10.50.0.12": {"pod": "app/web", "podUid": uid("web")}, // spiderpool's leak: a retry's address
	})
	spiderpoolPool(t, "v6", "fd00:50::/64", "", "fd00:50::10-fd00:50::50", map[string]map[string]string{
		"fd00:50::10": {"pod": "app/web", "podUid": uid("web")},
	})
	spiderpoolEndpoint(t, w.pods["web"], "Pod", "web",
		v2beta1.IPAllocationDetail{Interface: "eth0", IPv4: ptr.To("10.51.0.10/24"), IPv4Pool: ptr.To("eth0-pool"), IPv4Gateway: ptr.To("10.51.0.1")},
		v2beta1.IPAllocationDetail{Interface: "net1", IPv4: ptr.To("10.50.0.10/24"), IPv4Pool: ptr.To("v4"), IPv4Gateway: ptr.To("10.50.0.1"),
			IPv6: ptr.To("fd00:50::10/64"), IPv6Pool: ptr.To("v6")})
	spiderpoolEndpoint(t, w.pods["db-0"], "StatefulSet", "db",
		v2beta1.IPAllocationDetail{Interface: "net1", IPv4: ptr.To("10.50.0.11/24"), IPv4Pool: ptr.To("v4"), IPv4Gateway: ptr.To("10.50.0.1")})
	spiderpoolEndpoint(t, w.pods["plain"], "Pod", "plain",
		v2beta1.IPAllocationDetail{Interface: "eth0", IPv4: ptr.To("10.51.0.13/24"), IPv4Pool: ptr.To("eth0-pool"), IPv4Gateway: ptr.To("10.51.0.1")})

	w.webNetNS = sandbox(t, "net1", "10.50.0.10/24", "fd00:50::10/64")

	// spiderpool itself.
	agent := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "spiderpool-agent-x7k2p", Labels: map[string]string{"app.kubernetes.io/name": "spiderpool"}},
		Spec: corev1.PodSpec{NodeName: nodeName, HostNetwork: true,
			Containers: []corev1.Container{{Name: "spiderpool-agent", Image: "ghcr.io/spidernet-io/spiderpool/spiderpool-agent:v0.9.3"}}},
	}
	g.Expect(c.Create(ctx, agent)).To(Succeed())
	agent.Status.Phase = corev1.PodRunning
	g.Expect(c.Status().Update(ctx, agent)).To(Succeed())
	g.Expect(c.Create(ctx, &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "spiderpool-controller"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "spiderippool.spiderpool.spidernet.io",
			ClientConfig:            admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "kube-system", Name: "spiderpool-controller", Path: ptr.To("/validate")}},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{"spiderpool.spidernet.io"}, APIVersions: []string{"v2beta1"}, Resources: []string{"spidersubnets"}}}},
			FailurePolicy:           ptr.To(admissionv1.Ignore),
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	})).To(Succeed())
	return w
}

// podAnnotations returns the annotations of every pod of the app namespace, by name.
func podAnnotations(t *testing.T) map[string]map[string]string {
	t.Helper()
	var pods corev1.PodList
	if err := suite.env.Client.List(context.Background(), &pods, client.InNamespace(appNS)); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = p.Annotations
	}
	return out
}

func endpointUID(t *testing.T, name string) string {
	t.Helper()
	ep := &v2beta1.SpiderEndpoint{}
	if err := suite.env.Client.Get(context.Background(), client.ObjectKey{Namespace: appNS, Name: name}, ep); err != nil {
		t.Fatal(err)
	}
	return string(ep.UID)
}

// networkConfig is the NAD's CNI configuration, as SpiderMultusConfig generated it:
// macvlan with spiderpool as IPAM, CNI 0.3.1.
func networkConfig() string {
	data, _ := json.Marshal(map[string]any{
		"cniVersion": "0.3.1", "name": "macvlan",
		"plugins": []any{map[string]any{"type": "macvlan", "master": parent, "mode": "bridge", "ipam": map[string]any{"type": "spiderpool"}}},
	})
	return string(data)
}

func runningPod(t *testing.T, name string, ann map[string]string, owners []metav1.OwnerReference) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: name, Annotations: ann, OwnerReferences: owners},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := suite.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	if err := suite.env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// spiderpoolPool creates a pool as spiderpool writes it, records in a JSON string.
func spiderpoolPool(t *testing.T, name, subnet, gateway, ips string, recs map[string]map[string]string) {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v2beta1.GroupVersion.WithKind("SpiderIPPool"))
	u.SetName(name)
	u.SetFinalizers([]string{"spiderpool.spidernet.io"})
	spec := map[string]any{"subnet": subnet, "ips": []any{ips}, "default": false, "disable": false}
	if gateway != "" {
		spec["gateway"] = gateway
	}
	u.Object["spec"] = spec
	if err := suite.env.Client.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(recs)
	u.Object["status"] = map[string]any{"allocatedIPs": string(data), "allocatedIPCount": int64(len(recs)), "totalIPCount": int64(41)}
	if err := suite.env.Client.Status().Update(ctx, u); err != nil {
		t.Fatalf("pool %s status: %v", name, err)
	}
}

func spiderpoolString(t *testing.T, pool string) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v2beta1.GroupVersion.WithKind("SpiderIPPool"))
	if err := suite.env.Client.Get(context.Background(), client.ObjectKey{Name: pool}, u); err != nil {
		t.Fatal(err)
	}
	s, _, _ := unstructured.NestedString(u.Object, "status", "allocatedIPs")
	return s
}

func spiderpoolEndpoint(t *testing.T, pod *corev1.Pod, kind, controller string, ips ...v2beta1.IPAllocationDetail) {
	t.Helper()
	ep := &v2beta1.SpiderEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, Finalizers: []string{"spiderpool.spidernet.io"}},
		Status: v2beta1.WorkloadEndpointStatus{
			Current:             v2beta1.PodIPAllocation{UID: string(pod.UID), Node: nodeName, IPs: ips},
			OwnerControllerType: kind, OwnerControllerName: controller,
		},
	}
	if err := suite.env.Client.Create(context.Background(), ep); err != nil {
		t.Fatal(err)
	}
}

// sandbox creates a pod's network namespace holding a macvlan interface on the
// node's uplink with the given addresses, as spiderpool's ADD left it.
func sandbox(t *testing.T, iface string, addrs ...string) ns.NetNS {
	t.Helper()
	pod, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pod.Close()
		_ = testutils.UnmountNS(pod)
	})
	err = suite.node.Do(func(ns.NetNS) error {
		up, err := netlink.LinkByName(parent)
		if err != nil {
			return err
		}
		mv := &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "mv-tmp", ParentIndex: up.Attrs().Index, Namespace: netlink.NsFd(int(pod.Fd()))}, Mode: netlink.MACVLAN_MODE_BRIDGE}
		return netlink.LinkAdd(mv)
	})
	if err != nil {
		t.Fatalf("macvlan: %v", err)
	}
	err = pod.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("mv-tmp")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetName(l, iface); err != nil {
			return err
		}
		for _, a := range addrs {
			addr, err := netlink.ParseAddr(a)
			if err != nil {
				return err
			}
			if err := netlink.AddrAdd(l, addr); err != nil {
				return err
			}
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatalf("sandbox %s: %v", iface, err)
	}
	return pod
}

func hasLink(t *testing.T, n ns.NetNS, name string) bool {
	t.Helper()
	found := false
	_ = n.Do(func(ns.NetNS) error {
		_, err := netlink.LinkByName(name)
		found = err == nil
		return nil
	})
	return found
}

// uninstallSpiderpool runs the runbook's NAD step (the NAD no longer has a
// SpiderMultusConfig owner) and does what its `helm uninstall --no-hooks` does:
// spiderpool's pods and webhook configurations go, its CRDs and their objects stay.
func uninstallSpiderpool(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c := suite.env.Client
	g := NewWithT(t)
	shell(t, t.TempDir(), `kubectl patch network-attachment-definition -n app macvlan --type json -p '[{"op":"remove","path":"/metadata/ownerReferences"}]'`)
	g.Expect(c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "spiderpool-agent-x7k2p"}}, client.GracePeriodSeconds(0))).To(Succeed())
	g.Expect(c.Delete(ctx, &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "spiderpool-controller"}})).To(Succeed())
}

func startIPAMD(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.New(suite.env.Config, daemon.Options{
		NodeName: nodeName, SocketPath: filepath.Join(suite.runDir, filepath.Base(api.DefaultSocketPath)),
		Scheme: testenv.NewScheme(), Log: logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	done, err := d.Start(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	})
}

// delThroughSpiderpool runs CNI DEL for web's net1 as the runtime does through Multus
// with the delegate configuration it cached when spiderpool was the IPAM: type
// macvlan, ipam type spiderpool.
func delThroughSpiderpool(t *testing.T, w *world) {
	t.Helper()
	list, err := libcni.NetworkConfFromBytes([]byte(networkConfig()))
	if err != nil {
		t.Fatal(err)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{suite.binDir}, filepath.Join(suite.work, "cache"), nil)
	web := w.pods["web"]
	rt := &libcni.RuntimeConf{
		ContainerID: "c-web", NetNS: w.webNetNS.Path(), IfName: "net1",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", appNS}, {"K8S_POD_NAME", "web"}, {"K8S_POD_INFRA_CONTAINER_ID", "c-web"}, {"K8S_POD_UID", string(web.UID)}},
	}
	err = suite.node.Do(func(ns.NetNS) error { return cni.DelNetworkList(context.Background(), list, rt) })
	if err != nil {
		t.Fatalf("DEL through type spiderpool: %v", err)
	}
}

// runbookCommands are the commands of the runbook's spiderpool-migration blocks.
func runbookCommands(t *testing.T) []string {
	t.Helper()
	cmds, err := docs.Commands(testenv.RepoRoot(), docs.SpiderpoolMigration)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) == 0 {
		t.Fatal("docs/migrate-from-spiderpool.md has no spiderpool-migration block")
	}
	var out []string
	for _, c := range cmds {
		out = append(out, c.Line)
	}
	return uniq(out)
}

func uniq(list []string) []string {
	out := slices.Clone(list)
	sort.Strings(out)
	return slices.Compact(out)
}
