// Package coordinator is what ipamd answers spiderpool's coordinator CNI plugin, which
// asks the node for its configuration on every ADD and DEL (GET
// /v1/coordinator/config on the unix socket spiderpool's agent served, with the pod's
// name and namespace as a JSON body): the SpiderCoordinator's spec, the cluster's
// Service CIDRs and the pod's default-route-nic annotation, as spiderpool's agent
// answers it. It also says which SpiderCoordinators nicpool cannot serve (Check), for
// ipamd's answer and for the migration from spiderpool alike.
//
// The JSON field names are those of spiderpool v1.2.2's agent API
// (api/v1/agent/openapi.yaml: GetCoordinatorArgs, CoordinatorConfig).
package coordinator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipranges"
)

// Path is the endpoint coordinator calls, under spiderpool's agent API base path /v1.
const Path = "/v1/coordinator/config"

// DefaultSocketPath is where coordinator dials spiderpool's agent; it cannot be
// configured in coordinator.
const DefaultSocketPath = "/var/run/spidernet/spiderpool.sock"

// DefaultRouteNICAnnotation is a pod's choice of the interface that keeps its default
// route, overriding spec.podDefaultRouteNIC.
const DefaultRouteNICAnnotation = "ipam.spidernet.io/default-route-nic"

// MaxRequest bounds a request's body: two Kubernetes names and their keys.
const MaxRequest = 1024

// Request is coordinator's question (spiderpool's GetCoordinatorArgs).
type Request struct {
	PodName      string `json:"podName"`
	PodNamespace string `json:"podNamespace"`
}

// Validate checks the names as Kubernetes names: they come from whoever runs the
// plugin, and name the object ipamd reads.
func (r *Request) Validate() error {
	if r.PodNamespace == "" {
		return fmt.Errorf("podNamespace: required")
	}
	if errs := validation.IsDNS1123Label(r.PodNamespace); len(errs) > 0 {
		return fmt.Errorf("podNamespace %q: %s", clip(r.PodNamespace), strings.Join(errs, "; "))
	}
	if r.PodName == "" {
		return fmt.Errorf("podName: required")
	}
	if errs := validation.IsDNS1123Subdomain(r.PodName); len(errs) > 0 {
		return fmt.Errorf("podName %q: %s", clip(r.PodName), strings.Join(errs, "; "))
	}
	return nil
}

// clip shortens a hostile value for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Config is the answer (spiderpool's CoordinatorConfig). overlayPodCIDR, serviceCIDR,
// mode and tunePodRoutes are required by coordinator, so they are always written.
type Config struct {
	Mode               string   `json:"mode"`
	OverlayPodCIDR     []string `json:"overlayPodCIDR"`
	ServiceCIDR        []string `json:"serviceCIDR"`
	HijackCIDR         []string `json:"hijackCIDR,omitempty"`
	PolicyRoutes       []Route  `json:"policyRoutes,omitempty"`
	PodMACPrefix       string   `json:"podMACPrefix,omitempty"`
	TunePodRoutes      bool     `json:"tunePodRoutes"`
	PodDefaultRouteNIC string   `json:"podDefaultRouteNIC,omitempty"`
	HostRuleTable      int64    `json:"hostRuleTable,omitempty"`
	PodRPFilter        int64    `json:"podRPFilter"`
	TxQueueLen         int64    `json:"txQueueLen,omitempty"`
	VethLinkAddress    string   `json:"vethLinkAddress,omitempty"`
	VethMTU            int64    `json:"vethMTU,omitempty"`
}

// Route is one policy route (spiderpool's CoordinatorRoute).
type Route struct {
	Dst string `json:"dst"`
	Gw  string `json:"gw"`
}

// PluginMode is the mode coordinator understands for a SpiderCoordinator's spec.mode.
// The CRD's value "disabled" is "disable" to the plugin: spiderpool's agent passes
// "disabled" on unchanged, and coordinator then fails every ADD with "unknown
// tuneMode: disabled"; nicpool answers what the mode means.
func PluginMode(mode string) string {
	if mode == v2beta1.CoordinatorModeDisabled {
		return "disable"
	}
	return mode
}

// Pick is the SpiderCoordinator coordinator is answered from: the first by name, the
// first of the list spiderpool's agent reads. nil when there is none.
func Pick(list []v2beta1.SpiderCoordinator) *v2beta1.SpiderCoordinator {
	var first *v2beta1.SpiderCoordinator
	for i := range list {
		if first == nil || list[i].Name < first.Name {
			first = &list[i]
		}
	}
	return first
}

// Check lists what nicpool cannot serve, or refuses, in a SpiderCoordinator's spec,
// each naming its field: values spiderpool's own webhook refuses (the object may have
// been written while no webhook checked it), lists over nicpool's bounds, and
// podCIDRType values that make spiderpool detect the pod CIDRs from components nicpool
// does not read. Empty when ipamd serves it.
func Check(c *v2beta1.SpiderCoordinator) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	s := &c.Spec
	if s.Mode != nil && !slices.Contains([]string{v2beta1.CoordinatorModeAuto, v2beta1.CoordinatorModeUnderlay, v2beta1.CoordinatorModeOverlay, v2beta1.CoordinatorModeDisabled}, *s.Mode) {
		errs = append(errs, field.NotSupported(spec.Child("mode"), *s.Mode, []string{"auto", "underlay", "overlay", "disabled"}))
	}
	if t := cmp.Or(ptrValue(s.PodCIDRType), v2beta1.PodCIDRTypeNone); t != v2beta1.PodCIDRTypeNone {
		errs = append(errs, field.Invalid(spec.Child("podCIDRType"), t,
			"nicpool serves only \"none\": spiderpool detects the pod CIDRs of \""+t+"\" from kubeadm-config, kube-controller-manager, Calico or Cilium, which nicpool does not read; set podCIDRType to none and list the pod CIDRs in spec.hijackCIDR, which gives pods the same routes"))
	}
	if len(s.HijackCIDR) > v2beta1.MaxCoordinatorCIDRs {
		errs = append(errs, field.TooMany(spec.Child("hijackCIDR"), len(s.HijackCIDR), v2beta1.MaxCoordinatorCIDRs))
	} else {
		for i, c := range s.HijackCIDR {
			if _, err := prefix(c); err != nil {
				errs = append(errs, field.Invalid(spec.Child("hijackCIDR").Index(i), clip(c), err.Error()))
			}
		}
	}
	if len(s.PolicyRoutes) > v2beta1.MaxCoordinatorRoutes {
		errs = append(errs, field.TooMany(spec.Child("policyRoutes"), len(s.PolicyRoutes), v2beta1.MaxCoordinatorRoutes))
	} else {
		for i, r := range s.PolicyRoutes {
			p := spec.Child("policyRoutes").Index(i)
			dst, err := prefix(r.Dst)
			if err != nil {
				errs = append(errs, field.Invalid(p.Child("dst"), clip(r.Dst), err.Error()))
				continue
			}
			gw, ferr := ipranges.ParseAddr(r.Gw, p.Child("gw"))
			if ferr != nil {
				errs = append(errs, ferr)
				continue
			}
			if dst.Addr().Is4() != gw.Unmap().Is4() {
				errs = append(errs, field.Invalid(p, r.Dst+" via "+r.Gw, "dst and gw must be of one IP family"))
			}
		}
	}
	if m := ptrValue(s.PodMACPrefix); m != "" {
		if err := macPrefix(m); err != nil {
			errs = append(errs, field.Invalid(spec.Child("podMACPrefix"), clip(m), err.Error()))
		}
	}
	if n := ptrValue(s.PodDefaultRouteNIC); n != "" {
		if err := annotations.ValidateInterfaceName(n, spec.Child("podDefaultRouteNIC")); err != nil {
			errs = append(errs, err)
		}
	}
	if t := s.HostRuleTable; t != nil && (*t < 1 || *t > 1<<32-1) {
		errs = append(errs, field.Invalid(spec.Child("hostRuleTable"), *t, "must be a routing table number, 1 to 4294967295"))
	}
	if f := s.PodRPFilter; f != nil && *f > 2 {
		errs = append(errs, field.NotSupported(spec.Child("podRPFilter"), *f, []string{"0", "1", "2", "a negative number (leave it)"}))
	}
	if q := s.TxQueueLen; q != nil && (*q < 0 || *q > 1<<31-1) {
		errs = append(errs, field.Invalid(spec.Child("txQueueLen"), *q, "must be 0 (leave it) to 2147483647"))
	}
	if a := ptrValue(s.VethLinkAddress); a != "" {
		if _, ferr := ipranges.ParseAddr(a, spec.Child("vethLinkAddress")); ferr != nil {
			errs = append(errs, ferr)
		}
	}
	if m := s.VethMTU; m != nil && (*m < 1 || *m > 65535) {
		errs = append(errs, field.Invalid(spec.Child("vethMTU"), *m, "must be 1 to 65535"))
	}
	return errs
}

// prefix reads a CIDR, or an address as its host prefix, as spiderpool does.
func prefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("must be a CIDR or an IP address")
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("must be a CIDR or an IP address")
	}
	return p.Masked(), nil
}

// macPrefix checks two bytes "xx:yy" whose first is unicast.
func macPrefix(s string) error {
	a, b, ok := strings.Cut(s, ":")
	if !ok || len(a) != 2 || len(b) != 2 {
		return fmt.Errorf("must be two bytes in hexadecimal, e.g. 0a:1b")
	}
	first, err := strconv.ParseUint(a, 16, 8)
	if err != nil {
		return fmt.Errorf("must be two bytes in hexadecimal, e.g. 0a:1b")
	}
	if _, err := strconv.ParseUint(b, 16, 8); err != nil {
		return fmt.Errorf("must be two bytes in hexadecimal, e.g. 0a:1b")
	}
	if first&1 != 0 {
		return fmt.Errorf("must be unicast: the lowest bit of the first byte must be 0")
	}
	return nil
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Compute is the answer for a pod (nil when it is gone: a DEL after the pod was
// deleted is answered from the SpiderCoordinator alone) from the SpiderCoordinator
// Pick chose and the cluster's Service CIDRs. It refuses, naming the object and its
// fields, what Check refuses, and a default-route-nic annotation that is no interface
// name.
func Compute(c *v2beta1.SpiderCoordinator, serviceCIDRs []string, pod *corev1.Pod) (*Config, error) {
	if c == nil {
		return nil, fmt.Errorf("no SpiderCoordinator: create one (kubectl get spidercoordinators), as spiderpool's chart does, named default")
	}
	if errs := Check(c); len(errs) > 0 {
		return nil, fmt.Errorf("spidercoordinator %s is not served by nicpool: %s", c.Name, errs.ToAggregate().Error())
	}
	s := &c.Spec
	cfg := &Config{
		Mode:               PluginMode(cmp.Or(ptrValue(s.Mode), v2beta1.CoordinatorModeAuto)),
		OverlayPodCIDR:     []string{},
		ServiceCIDR:        append([]string{}, serviceCIDRs...),
		PodMACPrefix:       ptrValue(s.PodMACPrefix),
		TunePodRoutes:      s.TunePodRoutes == nil || *s.TunePodRoutes,
		PodDefaultRouteNIC: ptrValue(s.PodDefaultRouteNIC),
		HostRuleTable:      int64(cmp.Or(ptrValue(s.HostRuleTable), 500)),
		PodRPFilter:        int64(ptrValue(s.PodRPFilter)),
		TxQueueLen:         int64(ptrValue(s.TxQueueLen)),
		VethLinkAddress:    ptrValue(s.VethLinkAddress),
		VethMTU:            int64(ptrValue(s.VethMTU)),
	}
	for _, h := range s.HijackCIDR {
		p, _ := prefix(h) // Check read it
		cfg.HijackCIDR = append(cfg.HijackCIDR, p.String())
	}
	for _, r := range s.PolicyRoutes {
		p, _ := prefix(r.Dst)
		cfg.PolicyRoutes = append(cfg.PolicyRoutes, Route{Dst: p.String(), Gw: strings.TrimSpace(r.Gw)})
	}
	if pod != nil {
		if nic, ok := pod.Annotations[DefaultRouteNICAnnotation]; ok {
			if err := annotations.ValidateInterfaceName(nic, field.NewPath("metadata", "annotations").Key(DefaultRouteNICAnnotation)); err != nil {
				return nil, fmt.Errorf("pod %s/%s: %s", pod.Namespace, pod.Name, err.Error())
			}
			cfg.PodDefaultRouteNIC = nic
		}
	}
	return cfg, nil
}

// ErrorBody is how spiderpool's agent answers a failure: status 500 with a JSON
// string, which coordinator prints in its error.
func ErrorBody(msg string) []byte {
	b, _ := json.Marshal(msg)
	return b
}
