package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/action"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/e2e/helmtest"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// A release installed from a registry onto real nodes, as a cluster installs it: the
// local cluster on kubelet nodes (e2e/local, Node kubelet) whose containerd has the
// pause image alone, the release pushed to a registry running in the test, which the
// nodes reach on their network's gateway over plain HTTP, and `helm install` of its
// OCI chart with the Helm SDK, images.registry naming that registry. The nodes pull
// nicpool's images from it by digest: every container of nicpool runs the image
// index the release pins, which the registry served to that container's node. Then
// the seed cases of `make run` pass on that install: examples/ applied, the
// multi-NIC StatefulSet's pods get an IPv4 and an IPv6 address on each interface, the
// ones their SpiderEndpoints record, a pod deleted comes back with its addresses, and
// the invariants hold over records, endpoints and pods.
func TestInstallFromARegistryOnKubeletNodes(t *testing.T) {
	out := releaseDir(t)
	// The nodes' pause image: make release builds it with the product images.
	pause := filepath.Join(local.ImagesDir(), "pause.tar")
	if _, err := os.Stat(pause); err != nil {
		t.Fatalf("the nodes' pause image: %v (make images writes it)", err)
	}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/nicpool"
	rc := registryClient(t)
	pinned := pushRelease(t, out, repo, rc)

	// The same registry, served to the nodes on the fabric: what arrives there
	// comes from a node.
	pulls := &pullLog{}
	ctx := context.Background()
	const ns = "nicpool-system"
	var nodeRepo string
	var before []string
	st, err := helmtest.Up(ctx, t, "nicpool-registry-kubelet-", local.Options{
		Node:      local.NodeKubelet,
		Namespace: ns,
		Images:    []string{pause},
		Registry:  pulls.record(reg),
		Install: func(ctx context.Context, s *local.Stack) error {
			for _, n := range s.Kubelets {
				list, err := n.CtrOutput(ctx, "images", "ls", "-q")
				if err != nil {
					return err
				}
				// ctr's own warnings (time="..." level=warning) aside.
				var refs []string
				for _, line := range strings.Split(list, "\n") {
					if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "time=") {
						refs = append(refs, line)
					}
				}
				before = append(before, n.Name()+": "+strings.Join(refs, " "))
				if strings.Contains(list, "nicpool") {
					return fmt.Errorf("node %s has nicpool's images before the install:\n%s", n.Name(), list)
				}
			}
			// helm install nicpool oci://REGISTRY/nicpool/charts/nicpool --version X.Y.Z
			// -n nicpool-system --create-namespace --set images.registry=NODES_REGISTRY/nicpool
			nodeRepo = s.Registry() + "/nicpool"
			vals := map[string]any{"images": map[string]any{"registry": nodeRepo}, "certificates": map[string]any{"mode": "self-managed"}}
			return installFromRegistry(ctx, helmtest.Configure(t, &action.Configuration{}, s.AdminKubeconfig, ns), rc, repo, ns, vals)
		},
	})
	if err != nil {
		t.Fatalf("local stack on kubelet nodes with nicpool installed from the registry: %v", err)
	}
	t.Logf("images on the nodes before the install: %s", strings.Join(before, "; "))

	// Every container of nicpool runs the index the release pins, pulled by its node.
	pods := &corev1.PodList{}
	if err := st.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	pulledBy := map[string][]string{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			im, ok := imageOfContainer[c.Name]
			if !ok {
				t.Errorf("pod %s: container %s is none of nicpool's", p.Name, c.Name)
				continue
			}
			if want := nodeRepo + "/" + im + "@" + pinned[im]; c.ImageID != want {
				t.Errorf("pod %s on %s: container %s runs %s, want %s", p.Name, p.Spec.NodeName, c.Name, c.ImageID, want)
			}
			manifest := "/v2/nicpool/" + im + "/manifests/" + pinned[im]
			if !pulls.served(p.Status.HostIP, manifest) {
				t.Errorf("pod %s: its node %s (%s) was never served %s", p.Name, p.Spec.NodeName, p.Status.HostIP, manifest)
			}
			pulledBy[im] = append(pulledBy[im], p.Spec.NodeName)
		}
	}
	for _, im := range slices.Sorted(maps.Values(imageOfContainer)) {
		if len(pulledBy[im]) == 0 {
			t.Errorf("no running container of nicpool runs %s", im)
		}
		slices.Sort(pulledBy[im])
		t.Logf("%s@%s runs on %s", im, pinned[im], strings.Join(slices.Compact(pulledBy[im]), ", "))
	}
	t.Logf("the registry served the nodes:\n%s", pulls)

	// What `make run` shows: examples/ applied, the StatefulSet's pods running with
	// their addresses on every interface.
	if _, err := st.ApplyExamples(ctx, filepath.Join(testenv.RepoRoot(), "examples")); err != nil {
		t.Fatalf("apply examples: %v", err)
	}
	set := map[string]string{"app": local.ExampleSet}
	if err := st.WaitRunning(ctx, "default", set, 3, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	rows, err := st.PodInterfaces(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := local.PrintPodInterfaces(&table, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("pods in default, per interface:\n%s", table.String())
	running, err := st.RunningPods(ctx, "default", set)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]map[string][]netip.Addr{}
	for _, p := range running {
		addrs[p.Name] = helmtest.PodAddresses(ctx, t, st, p)
	}
	if len(addrs) != 3 {
		t.Fatalf("%d pods of %s running, want 3", len(addrs), local.ExampleSet)
	}

	// A StatefulSet pod deleted comes back with its addresses.
	old := &corev1.Pod{}
	if err := st.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: local.ExampleSet + "-0"}, old); err != nil {
		t.Fatal(err)
	}
	if err := st.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	var again corev1.Pod
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := st.RunningPods(ctx, "default", set)
		for _, p := range pods {
			if p.Name == old.Name && p.UID != old.UID {
				again = p
				return true, nil
			}
		}
		return false, err
	}); err != nil {
		t.Fatalf("%s deleted: no new pod of that name running: %v", old.Name, err)
	}
	recorded, err := st.RecordedAddrs(ctx, again, local.ExampleInterfaces)
	if err != nil {
		t.Error(err)
	}
	if !reflect.DeepEqual(recorded, addrs[old.Name]) {
		t.Errorf("pod %s re-created on %s: addresses %v, %v before on %s", old.Name, again.Spec.NodeName, recorded, addrs[old.Name], old.Spec.NodeName)
	}

	helmtest.CheckInvariants(t, st)
}

// pullLog records what the registry served the nodes: each request's client address,
// method, path and status.
type pullLog struct {
	mu   sync.Mutex
	reqs []pullRequest
}

type pullRequest struct {
	from, method, path string
	status             int
}

// record serves h, recording each request.
func (l *pullLog) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		from, _, _ := net.SplitHostPort(r.RemoteAddr)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.reqs = append(l.reqs, pullRequest{from: from, method: r.Method, path: r.URL.Path, status: sw.status})
	})
}

// served says whether a GET of path from the address from was answered 200.
func (l *pullLog) served(from, path string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.reqs {
		if r.from == from && r.method == http.MethodGet && r.path == path && r.status == http.StatusOK {
			return true
		}
	}
	return false
}

// String lists the manifests served and how many blobs, per client.
func (l *pullLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	blobs := map[string]int{}
	for _, r := range l.reqs {
		switch {
		case strings.Contains(r.path, "/manifests/"):
			fmt.Fprintf(&b, "%s %s %s %d\n", r.from, r.method, r.path, r.status)
		case strings.Contains(r.path, "/blobs/") && r.method == http.MethodGet && r.status == http.StatusOK:
			blobs[r.from]++
		}
	}
	for _, from := range slices.Sorted(maps.Keys(blobs)) {
		fmt.Fprintf(&b, "%s GET %d blobs\n", from, blobs[from])
	}
	return b.String()
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}
