package cli_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/operate/cli"
	"github.com/nicpool/nicpool/version"
)

// --client prints the plugin's own build and asks no cluster.
func TestVersionClient(t *testing.T) {
	out, errOut, code := kubectl(t, "version", "--client", "--server", "https://127.0.0.1:1")
	want := "Client Version: " + version.Get().String() + "\n"
	if code != 0 || out != want {
		t.Fatalf("kubectl nicpool version --client: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
}

// The versions the cluster runs come from its pods' images, in whatever namespace
// nicpool was installed; a second version anywhere is a warning.
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

	out, errOut, code := kubectl(t, "version")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"Client Version: " + version.Get().String() + "\n",
		"Webhook Version: v9.1.0 (1 pod) in namespace " + ns + "\n",
		"Ipamd Version: v9.0.3 (1 pod), v9.1.0 (2 pods) in namespace " + ns + "\n",
		"CNI plugin Version: unknown (1 pod), v9.1.0 (2 pods) in namespace " + ns + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "WARNING: version skew") || !strings.Contains(errOut, "v9.0.3, v9.1.0") {
		t.Errorf("stderr %q: want a skew warning naming v9.0.3 and v9.1.0", errOut)
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
		if got := cli.ImageVersion(image); got != want {
			t.Errorf("ImageVersion(%q) = %q, want %q", image, got, want)
		}
	}
}
