package manifests_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/nicpool/nicpool/e2e/testenv"
)

// The init container copies the plugin from where its Dockerfile puts it.
func TestInstallCNIMatchesTheDockerfile(t *testing.T) {
	objs := render(t, ".")
	ds := object[appsv1.DaemonSet](t, objs, "DaemonSet", "nicpool-ipamd")
	install := ds.Spec.Template.Spec.InitContainers[0]
	df, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "build", "nicpool.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^COPY --from=\S+ /out/nicpool (\S+)$`).FindStringSubmatch(string(df))
	if m == nil {
		t.Fatal("build/nicpool.Dockerfile does not copy the plugin into the image")
	}
	script := strings.Join(install.Command, " ")
	if !strings.Contains(script, "cp "+m[1]+" ") {
		t.Errorf("init container runs %q; the image has the plugin at %s", script, m[1])
	}
	if !strings.Contains(string(df), "FROM busybox") || install.Command[0] != "/bin/sh" {
		t.Errorf("the init container's shell must come from the image's base")
	}
}

// The init container's script, run against stand-ins for the image's plugin and the
// host's /opt/cni/bin, installs the plugin under both of its names.
func TestInstallCNIInstallsBothNames(t *testing.T) {
	ds := object[appsv1.DaemonSet](t, render(t, "."), "DaemonSet", "nicpool-ipamd")
	install := ds.Spec.Template.Spec.InitContainers[0]
	image, host := t.TempDir(), t.TempDir()
	plugin := filepath.Join(image, "nicpool")
	if err := os.WriteFile(plugin, []byte("plugin v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	// What an older install left behind is replaced.
	if err := os.WriteFile(filepath.Join(host, "spiderpool"), []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := strings.NewReplacer("/opt/nicpool/nicpool", plugin, "/host/opt/cni/bin", host).Replace(install.Command[len(install.Command)-1])
	if out, err := exec.Command(install.Command[0], "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("init container script: %v: %s", err, out)
	}
	for _, name := range []string{"nicpool", "spiderpool"} {
		data, err := os.ReadFile(filepath.Join(host, name))
		if err != nil || string(data) != "plugin v2" {
			t.Errorf("%s in /opt/cni/bin: %q, %v: want the plugin", name, data, err)
		}
	}
	if entries, _ := os.ReadDir(host); len(entries) != 2 {
		t.Errorf("/opt/cni/bin holds %d entries, want the two names only (no temporary file left)", len(entries))
	}
}

// Each Dockerfile is multi-stage and static: it builds its binary with cgo off (the
// default here links dynamically) and copies it onto a minimal base without a libc
// to link against; the webhook's image runs as the user its Deployment requires.
func TestDockerfilesAreMultiStageAndStatic(t *testing.T) {
	objs := render(t, ".")
	webhookUser := object[appsv1.Deployment](t, objs, "Deployment", "nicpool-webhook").Spec.Template.Spec.SecurityContext.RunAsUser
	for _, binary := range []string{"nicpool", "nicpool-ipamd", "nicpool-webhook"} {
		path := filepath.Join(testenv.RepoRoot(), "build", binary+".Dockerfile")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("no Dockerfile for cmd/%s: %v", binary, err)
			continue
		}
		df := string(data)
		froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(df, -1)
		if len(froms) < 2 {
			t.Errorf("%s: want a build stage and a runtime stage, got %d FROM", binary, len(froms))
			continue
		}
		final := froms[len(froms)-1][1]
		if !strings.HasPrefix(final, "gcr.io/distroless/static") && !strings.HasPrefix(final, "busybox:") {
			t.Errorf("%s: runtime base %s is not a minimal static base", binary, final)
		}
		if !regexp.MustCompile(`CGO_ENABLED=0 go build [^\n]*-o /out/` + binary + ` \./cmd/` + binary + `\n`).MatchString(df) {
			t.Errorf("%s: the build stage does not build ./cmd/%s statically (CGO_ENABLED=0)", binary, binary)
		}
		if binary == "nicpool-webhook" {
			if webhookUser == nil || !strings.Contains(df, "\nUSER "+strconv.FormatInt(*webhookUser, 10)+":") {
				t.Errorf("%s: the image's USER is not the Deployment's runAsUser %v", binary, webhookUser)
			}
		}
	}
}
