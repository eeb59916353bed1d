package cli_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/daemon"
	"github.com/nicpool/nicpool/operate/inspect"
	"github.com/nicpool/nicpool/operate/output"
	"github.com/nicpool/nicpool/version"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// --client prints the plugin's own build and asks no cluster.
func TestVersionClient(t *testing.T) {
	out, errOut, code := kubectl(t, "version", "--client", "--server", "https://127.0.0.1:1")
	want := "Client Version: " + version.Get().String() + "\n"
	if code != 0 || out != want {
		t.Fatalf("kubectl nicpool version --client: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
}

// The versions the cluster runs come from what its components report (each node's
// ipamd in its heartbeat Lease; the webhook, which this test's API server does not
// call, when asked through admission) and from its pods' images, in whatever
// namespace nicpool was installed; a second version anywhere is a warning.
func TestVersionFindsTheClusterAndWarnsOnSkew(t *testing.T) {
	ns := newNamespace(t, "nicpool-elsewhere")
	const digest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	pod := func(name, label, image, plugin string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": label}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: strings.TrimPrefix(label, "nicpool-"), Image: image}}},
		}
		if plugin != "" {
			p.Spec.InitContainers = []corev1.Container{{Name: "install-cni", Image: plugin}}
		}
		if err := env.Client.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p) })
	}
	pod("webhook-a", "nicpool-webhook", "ghcr.io/nicpool/nicpool-webhook:v9.1.0"+digest, "")
	pod("ipamd-a", "nicpool-ipamd", "ghcr.io/nicpool/nicpool-ipamd:v9.1.0", "ghcr.io/nicpool/nicpool:v9.1.0")
	pod("ipamd-b", "nicpool-ipamd", "ghcr.io/nicpool/nicpool-ipamd:v9.1.0", "ghcr.io/nicpool/nicpool:v9.1.0")
	pod("ipamd-c", "nicpool-ipamd", "registry.example:5000/nicpool-ipamd:v9.0.3"+digest, "registry.example:5000/nicpool"+digest)

	// This test's ipamd renews its heartbeat once its caches have synced.
	fixtures.Eventually(t, "ipamd's heartbeat Lease", func() bool {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: configs.DefaultNamespace, Name: daemon.LeaseName(node)}, &coordinationv1.Lease{}) == nil
	})
	out, errOut, code := kubectl(t, "version")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	mine := version.Get()
	for _, want := range []string{
		"Client Version: " + mine.String() + "\n",
		"Webhook Version: v9.1.0 (1 pod) in namespace " + ns + "\n",
		"Ipamd Version: " + version.Label(mine.Version) + " on 1 node " + node + "; images v9.0.3 (1 pod), v9.1.0 (2 pods) in namespace " + ns + "\n",
		"CNI plugin Version: unknown (1 pod), v9.1.0 (2 pods) in namespace " + ns + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "WARNING: version skew") || !strings.Contains(errOut, "v9.0.3, v9.1.0") {
		t.Errorf("stderr %q: want a skew warning naming v9.0.3 and v9.1.0", errOut)
	}

	// The same as a versioned list, for scripts.
	var list output.ComponentVersionList
	out, errOut, code = kubectl(t, "version", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("version -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	got := map[string]inspect.ComponentVersions{}
	for _, it := range list.Items {
		if it.Kind != output.KindComponentVersion || it.Name != it.Status.Component {
			t.Errorf("item %s %s of component %s", it.Kind, it.Name, it.Status.Component)
		}
		got[it.Name] = it.Status
	}
	if list.Kind != "ComponentVersionList" || len(got) != 4 {
		t.Fatalf("version -o json: %s with %v", list.Kind, got)
	}
	if c := got[inspect.VersionClient].Running; len(c) != 1 || c[0].Version != mine.Version || c[0].Revision != mine.Revision {
		t.Errorf("client: %+v, want %v", c, mine)
	}
	if r := got[inspect.VersionIpamd].Running; len(r) != 1 || r[0].Source != inspect.SourceHeartbeat || !slices.Equal(r[0].Nodes, []string{node}) {
		t.Errorf("ipamd running: %+v, want this test's ipamd's heartbeat on %s", r, node)
	}
	if w := got[inspect.VersionWebhook]; len(w.Running) != 0 || len(w.Unread) != 1 || !strings.Contains(w.Unread[0], "nicpool-webhook") {
		t.Errorf("webhook: %+v, want no running version and why: no webhook serves this API server", w)
	}
	if im := got[inspect.VersionIpamd].Images; !reflect.DeepEqual(im, []inspect.ImageTag{{Version: "v9.0.3", Pods: 1, Namespaces: []string{ns}}, {Version: "v9.1.0", Pods: 2, Namespaces: []string{ns}}}) {
		t.Errorf("ipamd images: %+v", im)
	}
	out, _, _ = kubectl(t, "version", "-o", "jsonpath={.items[?(@.metadata.name==\"ipamd\")].status.running[0].nodes[0]}")
	if out != node {
		t.Errorf("version -o jsonpath: %q, want %s", out, node)
	}
}

func TestImageVersion(t *testing.T) {
	for image, want := range map[string]string{
		"ghcr.io/nicpool/nicpool-ipamd:v0.1.0":                 "v0.1.0",
		"ghcr.io/nicpool/nicpool-ipamd:v0.1.0@sha256:00":       "v0.1.0",
		"registry.example:5000/nicpool-ipamd@sha256:00":        "unknown",
		"registry.example:5000/nicpool-ipamd":                  "unknown",
		"nicpool-ipamd":                                        "unknown",
		"registry.example:5000/team/nicpool-ipamd:v0.2.0-rc.1": "v0.2.0-rc.1",
	} {
		if got := inspect.ImageVersion(image); got != want {
			t.Errorf("ImageVersion(%q) = %q, want %q", image, got, want)
		}
	}
}
