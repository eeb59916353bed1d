package cli_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/operate/cli"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// untar reads a sysdump archive: file path below its top folder → contents.
func untar(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		top, rest, _ := strings.Cut(hdr.Name, "/")
		if !strings.HasPrefix(top, "nicpool-sysdump-") {
			t.Fatalf("%s is outside the archive's nicpool-sysdump-TIME folder", hdr.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[rest] = string(data)
	}
}

func TestSysdump(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "dump")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("dump-v4", "10.41.0.0/16", []string{"10.41.0.10-10.41.0.20"}))
	pod := runPod(t, ns, "web-0", nic{name: "eth0", v4: "dump-v4"})
	// What nicpool's namespace holds: a Secret the dump must not read, and a pod whose
	// log nobody can serve (no kubelet runs it).
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: configs.DefaultNamespace, Name: "nicpool-webhook-cert"},
		Data: map[string][]byte{"tls.key": []byte("-----BEGIN PRIVATE KEY----- not for a bug report")}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, secret) })
	ipamdPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: configs.DefaultNamespace, Name: "nicpool-ipamd-dump"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "ipamd", Image: "ghcr.io/nicpool/nicpool-ipamd:v0.1.0",
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9271}}}}}}
	g.Expect(env.Client.Create(ctx, ipamdPod)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, ipamdPod) })

	file := filepath.Join(t.TempDir(), "dump.tar.gz")
	out, errOut, code := kubectl(t, "sysdump", "--output-file", file)
	g.Expect(code).To(Equal(0), "stdout %s\nstderr %s", out, errOut)
	g.Expect(out).To(Equal("wrote " + file + "\n"))
	files := untar(t, file)
	for name, data := range files {
		g.Expect(data).NotTo(ContainSubstring("PRIVATE KEY"), "%s holds the Secret", name)
		g.Expect(data).NotTo(ContainSubstring("managedFields"), name)
	}
	g.Expect(files).To(HaveKeyWithValue("objects/spiderippools.yaml", ContainSubstring("name: dump-v4")))
	g.Expect(files).To(HaveKeyWithValue("objects/spiderendpoints.yaml", ContainSubstring(string(pod.UID))))
	g.Expect(files).To(HaveKeyWithValue("objects/ipblocks.yaml", ContainSubstring(ns+"/web-0")))
	g.Expect(files).To(HaveKey("objects/validatingadmissionpolicies.yaml"), "files are named by the resources' plurals, as kubectl names them")
	g.Expect(files).To(HaveKeyWithValue("objects/"+configs.DefaultNamespace+"_pods.yaml", ContainSubstring("name: nicpool-ipamd-dump")))
	// What check prints now (other tests of this package leave violations behind).
	check, _, _ := kubectl(t, "check")
	g.Expect(files["check.txt"]).To(HavePrefix(check))
	g.Expect(files).To(HaveKeyWithValue("check.json", ContainSubstring(`"kind": "ViolationList"`)))
	g.Expect(files).To(HaveKeyWithValue("status.json", ContainSubstring(`"kind": "StatusCheckList"`)))
	g.Expect(files).To(HaveKeyWithValue("pools.txt", ContainSubstring("dump-v4")))
	g.Expect(files).To(HaveKeyWithValue("version.txt", ContainSubstring("Client Version:")))
	// The pod no kubelet runs: its log and metrics could not be read, and the dump says so.
	g.Expect(files).To(HaveKeyWithValue("errors.txt", And(ContainSubstring("log of nicpool-ipamd-dump/ipamd: "), ContainSubstring("metrics of nicpool-ipamd-dump/ipamd: "))))

	_, errOut, code = kubectl(t, "sysdump", "--output-file", file)
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(errOut).To(ContainSubstring("--output-file: open " + file + ": file exists"))
}
