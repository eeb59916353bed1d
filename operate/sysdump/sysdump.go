// Package sysdump writes one archive of what a bug report about nicpool needs: its
// objects, the components' logs and metrics, and the reports of `kubectl nicpool
// check`, `status` and `version`. It reads through the API server with the caller's
// rights, and nothing secret: no Secret is read, and managed fields are dropped.
// What cannot be read (a missing right, a pod without logs) is listed in the
// archive's errors.txt instead of failing the dump.
package sysdump

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Options say what to read and how much.
type Options struct {
	// Namespace is where nicpool runs: its pods, their logs, Events and Leases.
	Namespace string
	// LogsSince and LogsLimitBytes bound each container's log.
	LogsSince      time.Duration
	LogsLimitBytes int64
	// Reports are the outputs of nicpool's own commands, file name → writer.
	Reports map[string]func(ctx context.Context, w io.Writer) error
	// Now names the archive's top folder.
	Now time.Time
}

// What is read cluster-wide, and in nicpool's namespace. NetworkAttachmentDefinitions
// hold CNI configurations, which name no secret in nicpool's schema.
var (
	clusterKinds = []schema.GroupVersionKind{
		{Group: "spiderpool.spidernet.io", Version: "v2beta1", Kind: "SpiderIPPool"},
		{Group: "spiderpool.spidernet.io", Version: "v2beta1", Kind: "SpiderReservedIP"},
		{Group: "spiderpool.spidernet.io", Version: "v2beta1", Kind: "SpiderEndpoint"},
		{Group: "ipam.nicpool.io", Version: "v1alpha1", Kind: "IPBlock"},
		{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"},
		{Version: "v1", Kind: "Node"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"},
		// Every namespace's Events that nicpool's components reported (ipamd's on the
		// pods it could not serve, the pool counter's on pools).
		{Group: "events.k8s.io", Version: "v1", Kind: "Event"},
	}
	namespaceKinds = []schema.GroupVersionKind{
		{Version: "v1", Kind: "Pod"},
		{Group: "apps", Version: "v1", Kind: "DaemonSet"},
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
		{Version: "v1", Kind: "Event"},
	}
)

// nicpools keeps, of the admission configurations and policies, nicpool's own, and of
// the cluster's Events those nicpool's components reported.
func nicpools(gvk schema.GroupVersionKind, o *unstructured.Unstructured) bool {
	switch gvk.Group {
	case "admissionregistration.k8s.io":
		return strings.HasPrefix(o.GetName(), "nicpool-") || strings.HasSuffix(o.GetName(), ".nicpool.io")
	case "events.k8s.io":
		by, _, _ := unstructured.NestedString(o.Object, "reportingController")
		legacy, _, _ := unstructured.NestedString(o.Object, "deprecatedSource", "component")
		return strings.HasPrefix(by, "nicpool") || strings.HasPrefix(legacy, "nicpool")
	}
	return true
}

// Write reads the cluster and writes the archive (tar.gz) to w.
func Write(ctx context.Context, w io.Writer, c client.Reader, cs kubernetes.Interface, opts Options) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	d := &dump{tw: tw, root: "nicpool-sysdump-" + opts.Now.UTC().Format("20060102-150405"), now: opts.Now}
	for _, gvk := range clusterKinds {
		d.objects(ctx, c, gvk, "")
	}
	for _, gvk := range namespaceKinds {
		d.objects(ctx, c, gvk, opts.Namespace)
	}
	d.logsAndMetrics(ctx, c, cs, opts)
	names := make([]string, 0, len(opts.Reports))
	for n := range opts.Reports {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var buf bytes.Buffer
		if err := opts.Reports[n](ctx, &buf); err != nil {
			// A report that finds problems still says what it found.
			fmt.Fprintf(&buf, "\n(exit: %v)\n", err)
		}
		d.file(n, buf.Bytes())
	}
	d.file("errors.txt", []byte(strings.Join(d.errs, "\n")+"\n"))
	if d.err != nil {
		return d.err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

type dump struct {
	tw   *tar.Writer
	root string
	now  time.Time
	errs []string
	err  error
}

func (d *dump) file(name string, data []byte) {
	if d.err != nil {
		return
	}
	hdr := &tar.Header{Name: path.Join(d.root, name), Mode: 0o644, Size: int64(len(data)), ModTime: d.now, Typeflag: tar.TypeReg}
	if d.err = d.tw.WriteHeader(hdr); d.err == nil {
		_, d.err = d.tw.Write(data)
	}
}

func (d *dump) failed(what string, err error) {
	d.errs = append(d.errs, what+": "+err.Error())
}

func (d *dump) objects(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace string) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	// The resource's plural, as kubectl names it (validatingadmissionpolicies).
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	what := plural.Resource
	if gvk.Group == "events.k8s.io" {
		what = "nicpool-events"
	}
	if namespace != "" {
		what = namespace + "/" + what
	}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		d.failed("list "+what, err)
		return
	}
	kept := list.Items[:0]
	for _, o := range list.Items {
		if !nicpools(gvk, &o) {
			continue
		}
		o.SetManagedFields(nil)
		kept = append(kept, o)
	}
	list.Items = kept
	data, err := yaml.Marshal(list.UnstructuredContent())
	if err != nil {
		d.failed("encode "+what, err)
		return
	}
	d.file(path.Join("objects", strings.ReplaceAll(what, "/", "_")+".yaml"), data)
}

// logsAndMetrics reads each container's log (and its previous one after a restart) of
// nicpool's pods, and each pod's metrics through the API server's pod proxy, from
// the container port named "metrics".
func (d *dump) logsAndMetrics(ctx context.Context, c client.Reader, cs kubernetes.Interface, opts Options) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(opts.Namespace)); err != nil {
		d.failed("list pods of "+opts.Namespace+" for their logs", err)
		return
	}
	since := int64(opts.LogsSince / time.Second)
	for _, p := range pods.Items {
		restarted := map[string]bool{}
		for _, st := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			restarted[st.Name] = st.RestartCount > 0
		}
		for _, ctr := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			for _, previous := range []bool{false, true} {
				if previous && !restarted[ctr.Name] {
					continue
				}
				lo := &corev1.PodLogOptions{Container: ctr.Name, Previous: previous, Timestamps: true}
				if since > 0 {
					lo.SinceSeconds = &since
				}
				if opts.LogsLimitBytes > 0 {
					lo.LimitBytes = &opts.LogsLimitBytes
				}
				name := path.Join("logs", p.Name, ctr.Name+".log")
				if previous {
					name = path.Join("logs", p.Name, ctr.Name+".previous.log")
				}
				data, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, lo).DoRaw(ctx)
				if err != nil {
					d.failed("log of "+p.Name+"/"+ctr.Name, err)
					continue
				}
				d.file(name, data)
			}
			for _, port := range ctr.Ports {
				if port.Name != "metrics" {
					continue
				}
				data, err := cs.CoreV1().Pods(p.Namespace).ProxyGet("http", p.Name, fmt.Sprint(port.ContainerPort), "/metrics", nil).DoRaw(ctx)
				if err != nil {
					d.failed("metrics of "+p.Name+"/"+ctr.Name, err)
					continue
				}
				d.file(path.Join("metrics", p.Name+".txt"), data)
			}
		}
	}
}
