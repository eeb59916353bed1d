package manifests_test

import (
	"os"
	"path/filepath"
	"regexp"
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
