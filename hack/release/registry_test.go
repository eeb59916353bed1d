package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	helmregistry "helm.sh/helm/v3/pkg/registry"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/e2e/helmtest"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/hack/images"
)

func TestMain(m *testing.M) { testenv.Main(m, nil) }

// releaseDir is a `make release VERSION=v0.1.0` output: $NICPOOL_RELEASE_DIR
// (`make test-registry` makes one for this machine's platform), else one made here
// from this checkout for this machine's platform.
func releaseDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("NICPOOL_RELEASE_DIR"); d != "" {
		return d
	}
	out := filepath.Join(t.TempDir(), "release")
	host := runtime.GOOS + "/" + runtime.GOARCH
	run(t, testenv.RepoRoot(), "make", "release", "VERSION="+version, "RELEASE_DIR="+out, "IMAGE_PLATFORMS="+host, "PLUGIN_PLATFORMS="+host)
	return out
}

// A release pushed as the release workflow pushes it, to a registry running in the
// test (go-containerregistry's), installs from there: the images' indexes keep the
// digests the chart pins, the chart is an OCI artifact `helm install
// oci://REGISTRY/nicpool/charts/nicpool --version X.Y.Z` installs with the Helm SDK on
// a real API server, and every container of the installation names the registry and
// an image index it serves, by digest, with an image for this machine's platform.
// TestInstallFromARegistryOnKubeletNodes shows real nodes pulling them.
func TestInstallFromARegistry(t *testing.T) {
	out := releaseDir(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/nicpool"
	rc := registryClient(t)
	pinned := pushRelease(t, out, repo, rc)

	// helm install nicpool oci://REGISTRY/nicpool/charts/nicpool --version X.Y.Z
	// -n nicpool-system --create-namespace --set images.registry=REGISTRY/nicpool
	env := testenv.StartT(t, testenv.Options{})
	const ns = "nicpool-system"
	cfg := helmtest.Configure(t, &action.Configuration{}, env.Kubeconfig, ns)
	vals := map[string]any{"images": map[string]any{"registry": repo}, "certificates": map[string]any{"mode": "self-managed"}}
	if err := installFromRegistry(context.Background(), cfg, rc, repo, ns, vals); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	dep := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nicpool-webhook"}, dep); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nicpool-ipamd"}, ds); err != nil {
		t.Fatal(err)
	}
	var containers []corev1.Container
	for _, spec := range []corev1.PodSpec{dep.Spec.Template.Spec, ds.Spec.Template.Spec} {
		containers = append(append(containers, spec.InitContainers...), spec.Containers...)
	}
	if len(containers) != len(imageOfContainer) {
		t.Errorf("%d containers installed, want %d", len(containers), len(imageOfContainer))
	}
	host := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	for _, c := range containers {
		im := imageOfContainer[c.Name]
		if want := repo + "/" + im + ":" + version + "@" + pinned[im]; c.Image != want {
			t.Errorf("container %s: image %s, want %s", c.Name, c.Image, want)
			continue
		}
		ref, err := name.ParseReference(c.Image)
		if err != nil {
			t.Fatal(err)
		}
		// What a node pulls: the index by digest, then its image for the node's platform.
		idx, err := remote.Index(ref)
		if err != nil {
			t.Errorf("container %s: the registry does not serve %s: %v", c.Name, c.Image, err)
			continue
		}
		if d, _ := idx.Digest(); d.String() != pinned[im] {
			t.Errorf("container %s: the registry's index is %s, the release's %s", c.Name, d, pinned[im])
		}
		img, err := remote.Image(ref, remote.WithPlatform(host))
		if err != nil {
			t.Errorf("container %s: no %s image in %s: %v", c.Name, host, c.Image, err)
			continue
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != host.OS || cf.Architecture != host.Architecture {
			t.Errorf("container %s: %s's %s image is for %s/%s", c.Name, c.Image, host, cf.OS, cf.Architecture)
		}
	}
}

// imageOfContainer names the image of each container nicpool installs.
var imageOfContainer = map[string]string{"webhook": "nicpool-webhook", "ipamd": "nicpool-ipamd", "install-cni": "nicpool"}

// registryClient is Helm's client of the test's registry, plain HTTP.
func registryClient(t *testing.T) *helmregistry.Client {
	t.Helper()
	rc, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptWriter(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// pushRelease pushes the release of out to repo (REGISTRY/nicpool) as the release
// workflow pushes it to ghcr.io/nicpool: each image's index under its name and the
// version, the chart as an OCI artifact under charts/ (helm push). It returns the
// digest the release pins, by image.
func pushRelease(t *testing.T, out, repo string, rc *helmregistry.Client) map[string]string {
	t.Helper()
	pinned := map[string]string{}
	for _, im := range images.Product {
		top, m := layoutIndex(t, out, im.Name)
		idx, err := top.ImageIndex(m.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.ParseReference(repo + "/" + im.Name + ":" + version)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.WriteIndex(ref, idx); err != nil {
			t.Fatalf("push %s: %v", ref, err)
		}
		pinned[im.Name] = strings.TrimSpace(read(t, filepath.Join(out, "images", im.Name+".digest")))
	}
	charts, err := filepath.Glob(filepath.Join(out, "nicpool-*.tgz"))
	if err != nil || len(charts) != 1 {
		t.Fatalf("the release's chart: %v %v", charts, err)
	}
	push := action.NewPushWithOpts(action.WithPushConfig(&action.Configuration{RegistryClient: rc}), action.WithPlainHTTP(true))
	push.Settings = cli.New()
	if _, err := push.Run(charts[0], "oci://"+repo+"/charts"); err != nil {
		t.Fatalf("helm push %s oci://%s/charts: %v", filepath.Base(charts[0]), repo, err)
	}
	return pinned
}

// installFromRegistry runs `helm install nicpool oci://REPO/charts/nicpool --version
// X.Y.Z -n ns --create-namespace --take-ownership` with vals (the Helm SDK), after
// checking that the registry's chart is the release's version. The API server has
// nicpool's CRDs already, which the release takes over.
func installFromRegistry(ctx context.Context, cfg *action.Configuration, rc *helmregistry.Client, repo, ns string, vals map[string]any) error {
	cfg.RegistryClient = rc
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.CreateNamespace = "nicpool", ns, true
	inst.TakeOwnership = true
	inst.PlainHTTP = true
	inst.Version = strings.TrimPrefix(version, "v")
	chartRef := "oci://" + repo + "/charts/nicpool"
	path, err := inst.LocateChart(chartRef, cli.New())
	if err != nil {
		return fmt.Errorf("helm pull %s --version %s: %w", chartRef, inst.Version, err)
	}
	ch, err := loader.Load(path)
	if err != nil {
		return err
	}
	if ch.Metadata.Version != inst.Version || ch.Metadata.AppVersion != version {
		return fmt.Errorf("the registry's chart is version %s, appVersion %s; want %s, %s", ch.Metadata.Version, ch.Metadata.AppVersion, inst.Version, version)
	}
	if _, err := inst.RunWithContext(ctx, ch, vals); err != nil {
		return fmt.Errorf("helm install nicpool %s: %w", chartRef, err)
	}
	return nil
}
