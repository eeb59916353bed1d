// Package helmtest is what the tests that install nicpool with the Helm SDK share:
// e2e/helm's (the chart) and hack/release's (a release installed from a registry),
// each a module of its own. It has a Helm action configuration on a kubeconfig, the
// local stack (e2e/local) brought up for a test and down after it, and the checks of
// the sample StatefulSet's pods on that stack.
//
// The package is in nicpool's own module, which has no Helm SDK: it names the SDK's
// action.Configuration by its Init method alone, so that the modules that have the
// SDK pass theirs in.
package helmtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/ipamd/invariants"
)

// Initer is the Helm SDK's *action.Configuration, by its Init method; L is the SDK's
// action.DebugLog.
type Initer[L ~func(format string, v ...any)] interface {
	Init(getter genericclioptions.RESTClientGetter, namespace, helmDriver string, log L) error
}

// Configure initialises cfg, a Helm SDK action configuration (&action.Configuration{}),
// for the cluster of kubeconfig and the release namespace ns, releases stored in
// Secrets as the helm command stores them, and returns it. What the SDK logs is
// written to the test's log when the test fails.
func Configure[C Initer[L], L ~func(format string, v ...any)](t testing.TB, cfg C, kubeconfig, ns string) C {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	var logs bytes.Buffer
	if err := cfg.Init(flags, ns, "secret", func(format string, v ...any) { fmt.Fprintf(&logs, format+"\n", v...) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	return cfg
}

// Log is an io.Writer to the test's log, a line a Write (local.Options.Out).
func Log(t testing.TB) io.Writer { return testLog{t} }

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Up brings the local stack up with opts (local.Up), in a new temporary directory
// named after pattern (os.MkdirTemp) and with its progress in the test's log unless
// opts say otherwise, and returns what local.Up returns. The stack is brought down
// when the test ends, a failure to stop reported as the test's; its directory (the
// stack's state and logs) is then kept when the test failed, its path logged, and
// removed otherwise.
func Up(ctx context.Context, t testing.TB, pattern string, opts local.Options) (*local.Stack, error) {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	opts.Dir = dir
	if opts.Out == nil {
		opts.Out = Log(t)
	}
	st, err := local.Up(ctx, opts)
	if st != nil {
		t.Cleanup(func() {
			if err := st.Down(); err != nil {
				t.Errorf("local stack down: %v", err)
			}
			if t.Failed() {
				t.Logf("the stack's logs: %s", dir)
			} else {
				_ = os.RemoveAll(dir)
			}
		})
	}
	return st, err
}

// PodAddresses reads a pod of the sample StatefulSet's addresses where a user sees
// them and returns its SpiderEndpoint's per interface (local.Stack.RecordedAddrs on
// local.ExampleInterfaces): the test fails unless they agree, and stops when either
// could not be read.
func PodAddresses(ctx context.Context, t testing.TB, st *local.Stack, pod corev1.Pod) map[string][]netip.Addr {
	t.Helper()
	recorded, err := st.RecordedAddrs(ctx, pod, local.ExampleInterfaces)
	if recorded == nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Error(err)
	}
	return recorded
}

// CheckInvariants holds the stack's allocation records, endpoints and pods to
// nicpool's allocation invariants (ipamd/invariants) once the garbage collector has converged (invariants.Check,
// Converged), polling until they hold (fixtures.Eventually), and stops the test with
// the last violations seen when they never do.
func CheckInvariants(t testing.TB, st *local.Stack) {
	t.Helper()
	fixtures.Eventually(t, "the invariants hold over records, endpoints and pods", func() (bool, string) {
		if err := invariants.Check(context.Background(), st.Client, invariants.Options{Converged: true}); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}
