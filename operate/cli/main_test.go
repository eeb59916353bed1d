package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/daemon"
	"github.com/nicpool/nicpool/operate/cli"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// The node the test pods run on; one ipamd serves it, in this process.
const node = "node-a"

var (
	env   *testenv.Env
	ipamd *daemon.Daemon
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(s *testenv.Setup) (err error) {
		if env, err = s.Start(testenv.Options{}); err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.Defer(func() error { cancel(); return nil })
		if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
			return err
		}
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: configs.DefaultNamespace}}); err != nil {
			return err
		}
		if ipamd, err = daemon.New(env.Config, daemon.Options{NodeName: node, Scheme: testenv.NewScheme(), Log: logr.Discard(), LeaseNamespace: configs.DefaultNamespace}); err != nil {
			return err
		}
		_, err = ipamd.Start(ctx)
		return err
	})
}

// kubectl runs `kubectl nicpool args…` against the test's API server as its admin, and
// returns what it printed and its exit code.
func kubectl(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", env.Kubeconfig}, args...))
	err := cmd.ExecuteContext(context.Background())
	if err != nil {
		fmt.Fprintln(&errOut, "error:", err)
	}
	return out.String(), errOut.String(), cli.ExitCode(err)
}

// kubectlJSON runs a command with -o json, checks that it printed a list of
// nicpool.io/v1alpha1, and decodes its items' status into v: all of them into a
// slice, the first one into anything else.
func kubectlJSON(t *testing.T, v any, args ...string) int {
	t.Helper()
	out, errOut, code := kubectl(t, append(args, "-o", "json")...)
	var list struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Items      []struct {
			APIVersion string          `json:"apiVersion"`
			Kind       string          `json:"kind"`
			Status     json.RawMessage `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl nicpool %v -o json: %v\nstdout: %s\nstderr: %s", args, err, out, errOut)
	}
	if list.APIVersion != "nicpool.io/v1alpha1" || !strings.HasSuffix(list.Kind, "List") {
		t.Fatalf("kubectl nicpool %v -o json: apiVersion %q kind %q, want a list of nicpool.io/v1alpha1", args, list.APIVersion, list.Kind)
	}
	statuses := make([]json.RawMessage, 0, len(list.Items))
	for _, it := range list.Items {
		if it.APIVersion != list.APIVersion || it.Kind+"List" != list.Kind {
			t.Fatalf("kubectl nicpool %v -o json: an item of %s is %s %s", args, list.Kind, it.APIVersion, it.Kind)
		}
		statuses = append(statuses, it.Status)
	}
	data, _ := json.Marshal(statuses)
	if reflect.TypeOf(v).Elem().Kind() != reflect.Slice {
		if len(statuses) == 0 {
			t.Fatalf("kubectl nicpool %v -o json: no items\nstderr: %s", args, errOut)
		}
		data = statuses[0]
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("kubectl nicpool %v -o json: %v", args, err)
	}
	return code
}

func newNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

// nic is one interface of a test pod and its pools.
type nic struct {
	name, network string
	v4, v6        string
}

// runPod creates a pod on the test node whose interfaces draw from the given pools, as
// admission leaves it (every ippools entry names its interface), and runs ipamd's ADD
// for each interface as the runtime would. It returns the pod.
func runPod(t *testing.T, ns, name string, nics ...nic) *corev1.Pod {
	t.Helper()
	return runPodWith(t, ns, name, nil, nics...)
}

// runPodWith is runPod with the pod's labels.
func runPodWith(t *testing.T, ns, name string, labels map[string]string, nics ...nic) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var sel []annotations.PoolSelection
	var networks []string
	for _, n := range nics {
		s := annotations.PoolSelection{Interface: n.name}
		if n.v4 != "" {
			s.IPv4 = []string{n.v4}
		}
		if n.v6 != "" {
			s.IPv6 = []string{n.v6}
		}
		sel = append(sel, s)
		if n.network != "" {
			networks = append(networks, n.network+"@"+n.name)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: map[string]string{
			annotations.IPPools:        annotations.Marshal(sel),
			annotations.MultusNetworks: strings.Join(networks, ","),
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	g := NewWithT(t)
	for _, n := range nics {
		req := &api.AllocateRequest{
			Attachment: api.Attachment{ContainerID: "c-" + name, Interface: n.name},
			Pod:        api.Pod{Namespace: ns, Name: name, UID: string(pod.UID)},
			Network:    api.NetworkConfig{Name: orDefault(n.network, "cluster")},
		}
		g.Eventually(func() error {
			_, err := ipamd.Service.Allocate(ctx, req)
			return err
		}).WithTimeout(time.Minute).Should(Succeed(), "ADD %s/%s %s", ns, name, n.name)
	}
	pod.Status.Phase = corev1.PodRunning
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// withGateway and friends shape test pools.
func withGateway(gw string, routes ...v2beta1.Route) func(*v2beta1.SpiderIPPool) {
	return func(p *v2beta1.SpiderIPPool) { p.Spec.Gateway, p.Spec.Routes = ptr.To(gw), routes }
}
