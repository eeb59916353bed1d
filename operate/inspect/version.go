package inspect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/version"
	"github.com/nicpool/nicpool/webhook/admission/pool"
)

// Components whose versions Versions reports.
const (
	VersionClient  = "client"
	VersionWebhook = "webhook"
	VersionIpamd   = "ipamd"
	VersionCNI     = "cni-plugin"
)

// Where a running version was read.
const (
	// SourceClient: this plugin's own build.
	SourceClient = "client"
	// SourceAdmission: the webhook replica the API server called answered a
	// dry-run SpiderIPPool create (pool.VersionProbeAnnotation) with its build.
	SourceAdmission = "admission"
	// SourceHeartbeat: the version label of each node's live ipamd heartbeat Lease.
	SourceHeartbeat = "heartbeat"
)

// ComponentVersions are the versions one component of nicpool runs: what its
// running processes report themselves, and the image tags of its pods.
type ComponentVersions struct {
	Component string `json:"component"`
	// Running are the builds the component's processes report, wherever they run
	// (pods, or processes as in `make up`).
	Running []RunningVersion `json:"running,omitempty"`
	// Images are the versions the image tags of its pods name (nicpool's pods
	// labelled app.kubernetes.io/name nicpool-webhook or nicpool-ipamd, any namespace).
	Images []ImageTag `json:"images,omitempty"`
	// Unread says what could not be read and why (a right the caller lacks, a
	// webhook that does not answer).
	Unread []string `json:"unread,omitempty"`
}

// RunningVersion is a build a running component reports.
type RunningVersion struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	GoVersion string `json:"goVersion,omitempty"`
	// Source is where it was read: client, admission or heartbeat.
	Source string `json:"source"`
	// Nodes are the nodes whose ipamd reports it (heartbeat).
	Nodes []string `json:"nodes,omitempty"`
}

// ImageTag is a version the image tags of a component's pods name.
type ImageTag struct {
	Version    string   `json:"version"`
	Pods       int      `json:"pods"`
	Namespaces []string `json:"namespaces"`
}

// The components' pods: their label, and the container whose image carries the
// component.
var imageComponents = []struct {
	name, podLabel, container string
	init                      bool
}{
	{VersionWebhook, "nicpool-webhook", "webhook", false},
	{VersionIpamd, "nicpool-ipamd", "ipamd", false},
	{VersionCNI, "nicpool-ipamd", "install-cni", true},
}

// Versions reads which versions of nicpool run in the cluster: the client's own, the
// webhook's as the replica the API server calls reports it, each node's ipamd's
// from its heartbeat Lease, and every component's from its pods' image tags. What
// the caller may not read, or what does not answer, is said in Unread; only a failure
// to reach the API server is an error.
func Versions(ctx context.Context, c client.Client, cfg *rest.Config, now time.Time) ([]ComponentVersions, error) {
	me := version.Get()
	out := []ComponentVersions{{Component: VersionClient, Running: []RunningVersion{{Version: me.Version, Revision: me.Revision, GoVersion: me.GoVersion, Source: SourceClient}}}}
	byName := map[string]*ComponentVersions{}
	for _, comp := range imageComponents {
		out = append(out, ComponentVersions{Component: comp.name})
	}
	for i := range out {
		byName[out[i].Component] = &out[i]
	}

	wh := byName[VersionWebhook]
	if info, err := WebhookVersion(ctx, cfg); err != nil {
		wh.Unread = append(wh.Unread, err.Error())
	} else {
		wh.Running = append(wh.Running, RunningVersion{Version: info.Version, Revision: info.Revision, GoVersion: info.GoVersion, Source: SourceAdmission})
	}

	ipamd := byName[VersionIpamd]
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.MatchingLabels{"app.kubernetes.io/name": "nicpool-ipamd"}); err != nil {
		if !apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("list ipamd's heartbeat Leases: %w", err)
		}
		ipamd.Unread = append(ipamd.Unread, fmt.Sprintf("ipamd's heartbeat Leases: %v", err))
	}
	nodes := map[string][]string{}
	for i := range leases.Items {
		l := &leases.Items[i]
		holder, fresh, _ := leaseState(l, now)
		if holder == "" || !fresh {
			continue // a stopped or crashed ipamd runs nothing
		}
		v := l.Labels[version.LabelKey]
		if v == "" {
			v = "unknown"
		}
		nodes[v] = append(nodes[v], holder)
	}
	for _, v := range sortedKeys(nodes) {
		sort.Strings(nodes[v])
		ipamd.Running = append(ipamd.Running, RunningVersion{Version: v, Source: SourceHeartbeat, Nodes: nodes[v]})
	}

	pods := map[string][]corev1.Pod{}
	for _, comp := range imageComponents {
		cv := byName[comp.name]
		list, ok := pods[comp.podLabel]
		if !ok {
			var pl corev1.PodList
			if err := c.List(ctx, &pl, client.MatchingLabels{"app.kubernetes.io/name": comp.podLabel}); err != nil {
				if !apierrors.IsForbidden(err) {
					return nil, fmt.Errorf("list the %s pods: %w", comp.podLabel, err)
				}
				cv.Unread = append(cv.Unread, fmt.Sprintf("the %s pods: %v", comp.podLabel, err))
			}
			list = pl.Items
			pods[comp.podLabel] = list
		}
		count, places := map[string]int{}, map[string]map[string]bool{}
		for _, p := range list {
			cs := p.Spec.Containers
			if comp.init {
				cs = p.Spec.InitContainers
			}
			for _, ctr := range cs {
				if ctr.Name == comp.container {
					v := ImageVersion(ctr.Image)
					count[v]++
					if places[v] == nil {
						places[v] = map[string]bool{}
					}
					places[v][p.Namespace] = true
				}
			}
		}
		for _, v := range sortedKeys(count) {
			cv.Images = append(cv.Images, ImageTag{Version: v, Pods: count[v], Namespaces: sortedKeys(places[v])})
		}
	}
	return out, nil
}

// ImageVersion is the version an image reference names: its tag (the chart renders
// repository:tag@digest when it pins a digest, and the release tags each image with
// its version), or "unknown" for a reference by digest alone.
func ImageVersion(image string) string {
	ref, _, _ := strings.Cut(image, "@")
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return "unknown"
	}
	return ref[i+1:]
}

// WebhookVersion asks the webhook replica the API server calls for its build: a
// dry-run SpiderIPPool create (which writes nothing) carrying
// pool.VersionProbeAnnotation, answered with a warning. It needs the right to create
// SpiderIPPools.
func WebhookVersion(ctx context.Context, cfg *rest.Config) (version.Info, error) {
	warnings := &answers{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = warnings
	c, err := client.New(cfg, client.Options{Scheme: probeScheme()})
	if err != nil {
		return version.Info{}, err
	}
	probe := &v2beta1.SpiderIPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "nicpool-version-probe-" + rand.String(5), Annotations: map[string]string{pool.VersionProbeAnnotation: ""}},
		Spec:       v2beta1.IPPoolSpec{Subnet: "192.0.2.0/24", IPs: []string{"192.0.2.10"}},
	}
	err = c.Create(ctx, probe, client.DryRunAll)
	if info, ok := warnings.answer(); ok {
		return info, nil
	}
	switch {
	case err == nil || strings.Contains(err.Error(), "denied the request"):
		// Admitted or denied without an answer: a webhook from before the probe.
		return version.Info{}, errors.New("the webhook the API server calls did not say its version (a version of nicpool-webhook from before v0.1.0?)")
	case apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "webhook"):
		return version.Info{}, fmt.Errorf("not asked: a dry-run SpiderIPPool create, which asks the webhook its version: %w", err)
	}
	return version.Info{}, fmt.Errorf("the API server cannot call nicpool-webhook: %w", err)
}

// answers keeps the version a probe's warning names.
type answers struct {
	mu   sync.Mutex
	info *version.Info
}

func (a *answers) HandleWarningHeader(_ int, _ string, text string) {
	if info, ok := pool.ParseVersionAnswer(text); ok {
		a.mu.Lock()
		a.info = &info
		a.mu.Unlock()
	}
}

func (a *answers) answer() (version.Info, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.info == nil {
		return version.Info{}, false
	}
	return *a.info, true
}

func probeScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = v2beta1.AddToScheme(s)
	return s
}
