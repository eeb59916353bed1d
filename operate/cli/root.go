// Package cli is the `kubectl nicpool` command line: cobra commands on cli-runtime's
// kubeconfig flags, each one a thin layer over the operate/ package that does the work:
// it parses arguments, calls it and prints the answer.
package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/scheme"
)

// Exit codes of the command.
const (
	// ExitFinding: the command ran and found something wrong in the cluster (a
	// violation, a disagreement, an address nobody holds, a refused release or
	// migration).
	ExitFinding = 1
	// ExitError: the command could not run (bad arguments, API server unreachable).
	ExitError = 2
)

// Finding is an error that reports something wrong in the cluster rather than a
// failure to look; the command exits with ExitFinding.
type Finding struct{ Msg string }

func (f *Finding) Error() string { return f.Msg }

func findingf(format string, args ...any) error { return &Finding{Msg: fmt.Sprintf(format, args...)} }

// ExitCode is the process exit code for the error Execute returned.
func ExitCode(err error) int {
	var f *Finding
	switch {
	case err == nil:
		return 0
	case errors.As(err, &f):
		return ExitFinding
	default:
		return ExitError
	}
}

// options are what every command shares.
type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	now     func() time.Time
	// chunk is --chunk-size: every list is read in pages of this many items.
	chunk int64
}

// NewCommand returns the root command, writing to streams.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), streams: streams, now: time.Now}
	root := &cobra.Command{
		Use:   "kubectl-nicpool",
		Short: "Inspect and repair nicpool's address allocations, and migrate from spiderpool",
		Long: `kubectl nicpool shows who holds an address, what each interface of a pod was
given and how full each pool is; checks nicpool's invariants and prints the command
that repairs each violation; releases an address whose holder is gone; and migrates
a cluster's allocations from spiderpool.

Exit status: 0 when all is well, 1 when the command found something wrong in the
cluster, 2 when it could not run.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl nicpool"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().Int64Var(&o.chunk, "chunk-size", defaultChunkSize, "read lists from the API server in pages of this many items, as kubectl get does; 0 reads each in one request")
	// The help shows where the cache goes on any machine, not this user's path.
	if f := root.PersistentFlags().Lookup("cache-dir"); f != nil {
		f.DefValue = "$HOME/.kube/cache"
	}
	_ = root.RegisterFlagCompletionFunc("namespace", completeNamespaces(o))
	root.AddCommand(newWhoCommand(o), newPodCommand(o), newPoolsCommand(o), newCheckCommand(o), newStatusCommand(o), newReleaseCommand(o), newRecordCommand(o), newMigrateCommand(o), newVersionCommand(o), newSysdumpCommand(o))
	return root
}

// Scheme knows the kinds the commands read and write.
func Scheme() *runtime.Scheme { return scheme.New(apiextensionsv1.AddToScheme) }

func (o *options) restConfig() (*rest.Config, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-nicpool"
	return cfg, nil
}

// discovery says which kinds the API server serves.
func (o *options) discovery() (discovery.DiscoveryInterface, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	return discovery.NewDiscoveryClientForConfig(cfg)
}

// client reads the API server directly: every answer is what is stored now. Its
// lists are read in pages of --chunk-size.
func (o *options) client() (client.Client, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, err
	}
	return paged{Client: c, chunk: o.chunk}, nil
}

// namespace is --namespace, else the kubeconfig context's namespace.
func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("namespace: %w", err)
	}
	return ns, nil
}
