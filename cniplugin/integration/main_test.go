package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
)

const (
	// nodeName is the node the test pods are bound to and ipamd serves.
	nodeName = "cni-node"
	// testNamespace holds the test pods.
	testNamespace = "cni-test"
)

// suite is what every test shares: one control plane, one ipamd, one node, one plugin
// directory (CONTRIBUTING.md: one control plane per test package).
var suite struct {
	env    *testenv.Env
	ipamd  *ipamd
	node   *node
	cni    *libcni.CNIConfig
	binDir string
	// logFile is where the plugin's log_file_path (LogDir/logName) is on this host.
	logFile string
	work    string
	// runDir and logDir are where the plugin's RunDir and LogDir are on this host: the
	// test's environment, which the plugins it execs inherit, relocates them.
	runDir, logDir string
}

// logName is the plugin's log file in LogDir.
const logName = "nicpool-cni.log"

func TestMain(m *testing.M) { testenv.Main(m, setup) }

// setup starts what the tests share; testenv.Main tears it down, whatever fails.
func setup(s *testenv.Setup) error {
	work, err := os.MkdirTemp("", "nicpool-cni-")
	if err != nil {
		return err
	}
	s.Defer(func() error { return os.RemoveAll(work) })
	suite.work = work
	suite.binDir = filepath.Join(work, "bin")
	suite.runDir, suite.logDir = filepath.Join(work, "run"), filepath.Join(work, "log")
	suite.logFile = filepath.Join(suite.logDir, logName)
	if err := os.Setenv(cniplugin.EnvRunDir, suite.runDir); err != nil {
		return err
	}
	if err := os.Setenv(cniplugin.EnvLogDir, suite.logDir); err != nil {
		return err
	}
	if err := installPlugins(suite.binDir); err != nil {
		return err
	}
	suite.cni = libcni.NewCNIConfigWithCacheDir([]string{suite.binDir}, filepath.Join(work, "cache"), nil)

	env, err := s.Start(testenv.Options{})
	if err != nil {
		return err
	}
	suite.env = env
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", testNamespace, err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if err := env.Client.Create(context.Background(), node); err != nil {
		return fmt.Errorf("create node %s: %w", nodeName, err)
	}

	if suite.node, err = newNode(); err != nil {
		return err
	}
	s.Defer(func() error { suite.node.close(); return nil })

	if suite.ipamd, err = startIPAMD(work, env); err != nil {
		return err
	}
	s.Defer(func() error { suite.ipamd.stop(); return nil })
	return nil
}

// installPlugins puts the plugins a runtime would find in its CNI bin directory: the
// plugin pair built from this checkout, installed as ipamd's DaemonSet installs it
// (nicpool-cni, then the front as nicpool and spiderpool), and the real macvlan plugin
// from bin/.
func installPlugins(dir string) error {
	if _, err := binaries.InstallPlugin(filepath.Join(filepath.Dir(dir), "built"), dir, cniplugin.Name, cniplugin.NameSpiderpool); err != nil {
		return err
	}
	root := testenv.RepoRoot()
	macvlan := filepath.Join(root, "bin", "macvlan")
	if _, err := os.Stat(macvlan); err != nil {
		return fmt.Errorf("the macvlan plugin is missing from bin/ (built by hack/tools): %w", err)
	}
	return os.Symlink(macvlan, filepath.Join(dir, "macvlan"))
}
