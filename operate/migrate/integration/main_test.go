package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientdiscovery "k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/cluster"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/operate/cli"
)

// The test's world: one control plane, one node (a network namespace holding the
// macvlan parent), the CNI plugins a node of a migrated cluster has.
var suite struct {
	env *testenv.Env
	// work holds the plugins (bin), the plugin's run and log directories and the CNI cache.
	work, binDir, runDir string
	node                 ns.NetNS
}

const (
	nodeName = "node-1"
	// parent is the node's uplink the pods' macvlan interfaces hang off.
	parent = "uplink"
)

func TestMain(m *testing.M) { testenv.Main(m, setup) }

func setup(s *testenv.Setup) error {
	work, err := os.MkdirTemp("", "nicpool-migrate-")
	if err != nil {
		return err
	}
	s.Defer(func() error { return os.RemoveAll(work) })
	suite.work, suite.binDir, suite.runDir = work, filepath.Join(work, "bin"), filepath.Join(work, "run")
	// The plugin's /run/nicpool and /var/log/nicpool, on this host.
	for k, v := range map[string]string{cniplugin.EnvRunDir: suite.runDir, cniplugin.EnvLogDir: filepath.Join(work, "log")} {
		if err := os.MkdirAll(v, 0o700); err != nil {
			return err
		}
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	if err := installPlugins(suite.binDir); err != nil {
		return err
	}
	if suite.env, err = s.Start(testenv.Options{ExtraCRDs: []*apiextensionsv1.CustomResourceDefinition{cluster.NetworkAttachmentDefinitionCRD()}}); err != nil {
		return err
	}
	if err := installSpiderpoolCRDs(context.Background()); err != nil {
		return err
	}
	node, err := newNode()
	if err != nil {
		return err
	}
	s.Defer(func() error { return errors.Join(node.Close(), testutils.UnmountNS(node)) })
	suite.node = node
	return nil
}

// installPlugins puts in dir what a node of a migrated cluster has: nicpool's plugin
// pair, the front under the name spiderpool with nicpool-cni beside it (as nicpool's
// DaemonSet installs it over spiderpool's), and the real macvlan plugin.
func installPlugins(dir string) error {
	if _, err := binaries.InstallPlugin(filepath.Join(filepath.Dir(dir), "built"), dir, cniplugin.NameSpiderpool); err != nil {
		return err
	}
	root := testenv.RepoRoot()
	macvlan := filepath.Join(root, "bin", "macvlan")
	if _, err := os.Stat(macvlan); err != nil {
		return fmt.Errorf("the macvlan plugin is missing from bin/ (make tools): %w", err)
	}
	// The runbook's plain kubectl commands run with the pinned kubectl.
	if _, err := os.Stat(filepath.Join(root, "bin", "kubectl")); err != nil {
		return fmt.Errorf("kubectl is missing from bin/ (make tools): %w", err)
	}
	return os.Symlink(macvlan, filepath.Join(dir, "macvlan"))
}

// installSpiderpoolCRDs turns the control plane into one where spiderpool's chart was
// installed: spiderpool's CRDs (testdata) in place of nicpool's, no IPBlocks.
func installSpiderpoolCRDs(ctx context.Context) error {
	c := suite.env.Client
	data, err := os.ReadFile(filepath.Join("testdata", "spiderpool-crds.yaml"))
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		want := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict([]byte(doc), want); err != nil {
			return fmt.Errorf("testdata/spiderpool-crds.yaml: %w", err)
		}
		cur := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: want.Name}, cur)
		switch {
		case apierrors.IsNotFound(err):
			err = c.Create(ctx, want)
		case err == nil:
			cur.Spec, cur.Annotations = want.Spec, want.Annotations
			err = c.Update(ctx, cur)
		}
		if err != nil {
			return fmt.Errorf("install CRD %s: %w", want.Name, err)
		}
	}
	blocks := &apiextensionsv1.CustomResourceDefinition{}
	blocks.Name = "ipblocks.ipam.nicpool.io"
	if err := c.Delete(ctx, blocks); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(blocks), blocks)
		return apierrors.IsNotFound(err), nil
	})
}

// newNode creates the node's network namespace with its uplink (one end of a veth
// pair), so that nothing of the host's network is touched.
func newNode() (ns.NetNS, error) {
	n, err := testutils.NewNS()
	if err != nil {
		return nil, err
	}
	err = n.Do(func(ns.NetNS) error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: parent}, PeerName: "uplink-peer"}); err != nil {
			return err
		}
		for _, name := range []string{"lo", parent, "uplink-peer"} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = n.Close()
		_ = testutils.UnmountNS(n)
		return nil, err
	}
	return n, nil
}

// ran lists the kubectl command lines the test ran, as a user types them.
var ran []string

// shell runs a plain kubectl command line of the runbook as a user types it: with bash,
// in dir, with bin/ (the pinned kubectl) first on PATH and the cluster's admin
// kubeconfig. It fails the test when the command fails.
func shell(t *testing.T, dir, line string) string {
	t.Helper()
	ran = append(ran, line)
	cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.env.Kubeconfig, "PATH="+filepath.Join(testenv.RepoRoot(), "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	t.Logf("$ %s\n%s", line, out)
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return string(out)
}

// kubectl runs `kubectl nicpool args…` as the cluster's admin and returns what it
// printed and its exit code.
func kubectl(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ran = append(ran, "kubectl nicpool "+strings.Join(args, " "))
	var out, errOut bytes.Buffer
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", suite.env.Kubeconfig}, args...))
	err := cmd.ExecuteContext(context.Background())
	if err != nil {
		fmt.Fprintln(&errOut, "error:", err)
	}
	var f *cli.Finding
	if err != nil && !errors.As(err, &f) {
		t.Logf("kubectl nicpool %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), cli.ExitCode(err)
}

// discovery is a discovery client of the test's API server, for migrate.Run.
func discovery(t *testing.T) clientdiscovery.DiscoveryInterface {
	t.Helper()
	d, err := suite.env.Discovery()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
