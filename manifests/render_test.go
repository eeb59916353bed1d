package manifests_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nicpool/nicpool/crds"
	"github.com/nicpool/nicpool/manifests"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

const namespace = "nicpool-system"

func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// object finds one rendered object and converts it to its Go type.
func object[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return out
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func kinds(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func forEachKustomization(t *testing.T, f func(t *testing.T, objs []*unstructured.Unstructured)) {
	for _, dir := range manifests.Kustomizations {
		t.Run(dir, func(t *testing.T) { f(t, render(t, dir)) })
	}
}

// Every kustomization installs all of nicpool's CRDs, one Namespace, and puts every
// namespaced object in it.
func TestEveryKustomizationInstallsCRDsIntoOneNamespace(t *testing.T) {
	defs, err := crds.Definitions()
	if err != nil {
		t.Fatal(err)
	}
	forEachKustomization(t, func(t *testing.T, objs []*unstructured.Unstructured) {
		var got []string
		for _, o := range kinds(objs, "CustomResourceDefinition") {
			got = append(got, o.GetName())
		}
		for _, d := range defs {
			if !slices.Contains(got, d.Name) {
				t.Errorf("CRD %s missing: list it in base/kustomization.yaml", d.Name)
			}
		}
		if ns := kinds(objs, "Namespace"); len(ns) != 1 || ns[0].GetName() != namespace {
			t.Errorf("want exactly the Namespace %s, got %d namespaces", namespace, len(ns))
		}
		cluster := []string{"CustomResourceDefinition", "Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
		for _, o := range objs {
			// The label lets an operator find (and delete) everything nicpool installed.
			if o.GetLabels()["app.kubernetes.io/part-of"] != "nicpool" {
				t.Errorf("%s %s lacks app.kubernetes.io/part-of=nicpool", o.GetKind(), o.GetName())
			}
			if !slices.Contains(cluster, o.GetKind()) && o.GetNamespace() != namespace {
				t.Errorf("%s %s is in namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
			}
		}
	})
}

// The webhook Deployment is what an operator of a production cluster expects: two
// replicas kept by a PodDisruptionBudget, probes, non-root with a read-only root
// filesystem, resources, and the serving certificate mounted from the Secret the
// certificate source writes.
func TestWebhookDeployment(t *testing.T) {
	forEachKustomization(t, func(t *testing.T, objs []*unstructured.Unstructured) {
		d := object[appsv1.Deployment](t, objs, "Deployment", "nicpool-webhook")
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
		}
		pod := d.Spec.Template.Spec
		if pod.ServiceAccountName != "nicpool-webhook" {
			t.Errorf("serviceAccountName = %q", pod.ServiceAccountName)
		}
		if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			t.Errorf("pod must run as a non-root user: %+v", sc)
		}
		if len(pod.Containers) != 1 {
			t.Fatalf("want one container, got %d", len(pod.Containers))
		}
		c := pod.Containers[0]
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container must have a read-only root filesystem, no privilege escalation and no capabilities: %+v", sc)
		}
		if c.ReadinessProbe == nil || c.LivenessProbe == nil {
			t.Error("webhook needs readiness and liveness probes")
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("webhook needs CPU and memory requests and a memory limit: %+v", c.Resources)
		}
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
			if p != nil && (p.HTTPGet == nil || !hasPort(c, p.HTTPGet.Port)) {
				t.Errorf("probe %+v does not target a port of the container", p)
			}
		}
		// The certificate directory: cert-manager's Secret, mounted read-only; or, for
		// self-managed certificates, a writable directory the webhook fills.
		certDir := argValue(c.Args, "--cert-dir")
		var certVolume *corev1.Volume
		for i, v := range pod.Volumes {
			if mounted(c, v.Name, certDir) {
				certVolume = &pod.Volumes[i]
			}
		}
		switch {
		case certVolume == nil:
			t.Errorf("nothing is mounted at --cert-dir %q", certDir)
		case slices.Contains(c.Args, "--self-managed-certs"):
			if certVolume.EmptyDir == nil || readOnlyMount(c, certVolume.Name) {
				t.Errorf("self-managed certificates need a writable --cert-dir, got %+v", certVolume.VolumeSource)
			}
		default:
			if certVolume.Secret == nil || certVolume.Secret.SecretName != "nicpool-webhook-cert" || !readOnlyMount(c, certVolume.Name) {
				t.Errorf("--cert-dir must be the Secret nicpool-webhook-cert mounted read-only, got %+v", certVolume.VolumeSource)
			}
		}

		pdb := object[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "nicpool-webhook")
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Error("the PodDisruptionBudget does not select the webhook's pods")
		}
		if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 {
			t.Errorf("PodDisruptionBudget must keep one replica: %+v", pdb.Spec)
		}

		svc := object[corev1.Service](t, objs, "Service", "nicpool-webhook")
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Error("the Service does not select the webhook's pods")
		}
		var webhookPort *corev1.ServicePort
		for i, p := range svc.Spec.Ports {
			if !hasPort(c, p.TargetPort) {
				t.Errorf("Service port %s targets %s, which the container does not expose", p.Name, p.TargetPort.String())
			}
			if p.Port == 443 {
				webhookPort = &svc.Spec.Ports[i]
			}
		}
		if webhookPort == nil || portNumber(c, webhookPort.TargetPort) != int32(atoi(t, argValue(c.Args, "--webhook-port"))) {
			t.Errorf("Service port 443 must reach --webhook-port %s", argValue(c.Args, "--webhook-port"))
		}
	})
}

// The webhook runs on the host network, so that it needs no pod address from the
// pools it guards (a fresh cluster whose pod network nicpool serves installs in any
// order). Its ports are then ports of the node: each flag listens where its named
// containerPort says (the scheduler places host ports by them), none collides with
// ipamd's on the same node, and a roll needs no node beyond those the replicas hold.
func TestWebhookOnTheHostNetwork(t *testing.T) {
	forEachKustomization(t, func(t *testing.T, objs []*unstructured.Unstructured) {
		d := object[appsv1.Deployment](t, objs, "Deployment", "nicpool-webhook")
		pod := d.Spec.Template.Spec
		if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			t.Errorf("the webhook must use the host network (hostNetwork %v, dnsPolicy %s)", pod.HostNetwork, pod.DNSPolicy)
		}
		c := pod.Containers[0]
		for name, flag := range map[string]string{"webhook": "--webhook-port", "metrics": "--metrics-bind-address", "health": "--health-probe-bind-address"} {
			if got, want := portNumber(c, intstr.FromString(name)), flagPort(t, c.Args, flag); got != want {
				t.Errorf("containerPort %q is %d but %s listens on %d: change both together", name, got, flag, want)
			}
		}
		ipamd := object[appsv1.DaemonSet](t, objs, "DaemonSet", "nicpool-ipamd").Spec.Template.Spec.Containers[0]
		for _, p := range c.Ports {
			if portNumber(ipamd, intstr.FromInt32(p.ContainerPort)) != 0 {
				t.Errorf("webhook port %s (%d) is also ipamd's: both hold it on the same node", p.Name, p.ContainerPort)
			}
		}
		roll := d.Spec.Strategy.RollingUpdate
		if roll == nil || roll.MaxSurge == nil || roll.MaxSurge.IntValue() != 0 || roll.MaxUnavailable == nil || roll.MaxUnavailable.IntValue() != 1 {
			t.Errorf("rolling update %+v: want maxSurge 0 (a surge replica needs a node without the webhook) and maxUnavailable 1", roll)
		}
	})
}

// The webhook configurations are exactly webhook/admission/configs' and call the Service that
// fronts the webhook Deployment.
func TestWebhookConfigurations(t *testing.T) {
	wantM, wantV := configs.Configurations(configs.Options{})
	forEachKustomization(t, func(t *testing.T, objs []*unstructured.Unstructured) {
		m := object[admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", configs.MutatingName)
		v := object[admissionregistrationv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration", configs.ValidatingName)
		if len(m.Webhooks) != len(wantM.Webhooks) || len(v.Webhooks) != len(wantV.Webhooks) {
			t.Fatalf("rendered %d+%d webhooks, webhook/admission/configs has %d+%d", len(m.Webhooks), len(v.Webhooks), len(wantM.Webhooks), len(wantV.Webhooks))
		}
		var clients []admissionregistrationv1.WebhookClientConfig
		for i, w := range m.Webhooks {
			clients = append(clients, w.ClientConfig)
			if w.Name != wantM.Webhooks[i].Name || *w.FailurePolicy != admissionregistrationv1.Fail || *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
				t.Errorf("mutating webhook %s differs from webhook/admission/configs", w.Name)
			}
		}
		for i, w := range v.Webhooks {
			clients = append(clients, w.ClientConfig)
			if w.Name != wantV.Webhooks[i].Name || *w.FailurePolicy != admissionregistrationv1.Fail || *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
				t.Errorf("validating webhook %s differs from webhook/admission/configs", w.Name)
			}
		}
		svc := object[corev1.Service](t, objs, "Service", "nicpool-webhook")
		for _, cc := range clients {
			if cc.Service == nil || cc.Service.Name != svc.Name || cc.Service.Namespace != svc.Namespace || cc.Service.Port == nil || !servicePort(svc, *cc.Service.Port) {
				t.Errorf("webhook client %+v does not reach Service %s/%s", cc.Service, svc.Namespace, svc.Name)
			}
		}
	})
}

// In cert-manager mode a CA of nicpool's own signs the serving certificate for the
// Service's DNS names into the Secret the Deployment mounts, and cainjector copies
// the CA into both webhook configurations.
func TestCertManagerOverlay(t *testing.T) {
	for _, dir := range []string{".", "overlays/cert-manager"} {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			issuers := map[string]map[string]any{}
			for _, o := range kinds(objs, "Issuer") {
				spec, _, _ := unstructured.NestedMap(o.Object, "spec")
				issuers[o.GetName()] = spec
			}
			certs := map[string]*unstructured.Unstructured{}
			for _, o := range kinds(objs, "Certificate") {
				certs[o.GetName()] = o
			}
			issuerOf := func(cert string) string {
				name, _, _ := unstructured.NestedString(certs[cert].Object, "spec", "issuerRef", "name")
				return name
			}
			// The chain: self-signed Issuer → CA Certificate → CA Issuer → serving Certificate.
			serving, ok := certs["nicpool-webhook"]
			if !ok {
				t.Fatal("no serving Certificate nicpool-webhook")
			}
			caIssuer := issuers[issuerOf("nicpool-webhook")]
			caSecret, _, _ := unstructured.NestedString(caIssuer, "ca", "secretName")
			var caCert string
			for name, c := range certs {
				if s, _, _ := unstructured.NestedString(c.Object, "spec", "secretName"); s == caSecret && caSecret != "" {
					caCert = name
				}
			}
			if caCert == "" {
				t.Fatalf("the serving certificate's issuer %s is not a CA Issuer fed by a Certificate", issuerOf("nicpool-webhook"))
			}
			if isCA, _, _ := unstructured.NestedBool(certs[caCert].Object, "spec", "isCA"); !isCA {
				t.Errorf("Certificate %s must be a CA", caCert)
			}
			if _, ok := issuers[issuerOf(caCert)]["selfSigned"]; !ok {
				t.Errorf("CA Certificate %s must come from a self-signed Issuer", caCert)
			}
			secret, _, _ := unstructured.NestedString(serving.Object, "spec", "secretName")
			if secret != "nicpool-webhook-cert" {
				t.Errorf("serving certificate written to %q, the Deployment mounts nicpool-webhook-cert", secret)
			}
			dns, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames")
			if !slices.Contains(dns, "nicpool-webhook.nicpool-system.svc") {
				t.Errorf("serving certificate DNS names %v lack the Service name the API server calls", dns)
			}
			want := namespace + "/nicpool-webhook"
			for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
				for _, o := range kinds(objs, kind) {
					if got := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != want {
						t.Errorf("%s %s: cert-manager.io/inject-ca-from = %q, want %q", kind, o.GetName(), got, want)
					}
				}
			}
			if args := object[appsv1.Deployment](t, objs, "Deployment", "nicpool-webhook").Spec.Template.Spec.Containers[0].Args; slices.Contains(args, "--self-managed-certs") {
				t.Errorf("the webhook manages its own certificates besides cert-manager: %v", args)
			}
		})
	}
}

// Without cert-manager nothing of cert-manager is rendered; the webhook manages its
// certificates in the Secret it mounts.
func TestSelfManagedOverlay(t *testing.T) {
	objs := render(t, "overlays/self-managed")
	for _, o := range objs {
		if strings.Contains(o.GetAPIVersion(), "cert-manager.io") {
			t.Errorf("%s %s needs cert-manager", o.GetKind(), o.GetName())
		}
		if _, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("%s %s asks cert-manager for a CA", o.GetKind(), o.GetName())
		}
	}
	object[corev1.Secret](t, objs, "Secret", "nicpool-webhook-cert")
	args := object[appsv1.Deployment](t, objs, "Deployment", "nicpool-webhook").Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--self-managed-certs") {
		t.Errorf("the webhook does not manage its certificates: %v", args)
	}
	// The webhook's default Secret name, which the RBAC of this overlay grants.
	if s := argValue(args, "--cert-secret"); s != "" && s != "nicpool-webhook-cert" {
		t.Errorf("--cert-secret %s is not the Secret the overlay creates and grants", s)
	}
}

// ipamd runs on every node in the host network, serves its socket in the host's
// /run/nicpool, and installs the CNI plugin into the host's /opt/cni/bin before it
// starts.
func TestIpamdDaemonSet(t *testing.T) {
	forEachKustomization(t, func(t *testing.T, objs []*unstructured.Unstructured) {
		ds := object[appsv1.DaemonSet](t, objs, "DaemonSet", "nicpool-ipamd")
		pod := ds.Spec.Template.Spec
		if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			t.Errorf("ipamd must use the host network (hostNetwork %v, dnsPolicy %s)", pod.HostNetwork, pod.DNSPolicy)
		}
		if pod.ServiceAccountName != "nicpool-ipamd" {
			t.Errorf("serviceAccountName = %q", pod.ServiceAccountName)
		}
		if !slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool { return t.Operator == corev1.TolerationOpExists && t.Key == "" }) {
			t.Error("ipamd must tolerate every taint: every node runs pods that need addresses")
		}
		hostPaths := map[string]string{}
		for _, v := range pod.Volumes {
			if v.HostPath != nil {
				hostPaths[v.Name] = v.HostPath.Path
			}
		}
		if len(pod.InitContainers) != 1 {
			t.Fatalf("want one init container that installs the CNI plugin, got %d", len(pod.InitContainers))
		}
		install := pod.InitContainers[0]
		cmd := strings.Join(append(install.Command, install.Args...), " ")
		if !strings.Contains(install.Image, "nicpool/nicpool:") || !strings.Contains(cmd, "/nicpool") {
			t.Errorf("init container %s (%s: %s) does not install the nicpool plugin", install.Name, install.Image, cmd)
		}
		if !mountsHostPath(install, hostPaths, "/opt/cni/bin") {
			t.Error("init container does not mount the host's /opt/cni/bin")
		}
		if len(pod.Containers) != 1 {
			t.Fatalf("want one container, got %d", len(pod.Containers))
		}
		c := pod.Containers[0]
		if argValue(c.Args, "--socket") != "/run/nicpool/ipamd.sock" || !mountsHostPath(c, hostPaths, "/run/nicpool") {
			t.Errorf("ipamd must serve /run/nicpool/ipamd.sock on the host's /run/nicpool: args %v", c.Args)
		}
		if argValue(c.Args, "--node-name") != "$(NODE_NAME)" || !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
		}) {
			t.Error("ipamd must learn its node from the downward API")
		}
		for _, ctr := range append([]corev1.Container{c}, install) {
			if ctr.Resources.Requests.Memory().IsZero() || ctr.Resources.Limits.Memory().IsZero() {
				t.Errorf("container %s needs a memory request and limit", ctr.Name)
			}
			if sc := ctr.SecurityContext; sc == nil || sc.Privileged != nil && *sc.Privileged || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				t.Errorf("container %s must be unprivileged without capabilities", ctr.Name)
			}
		}
	})
}

// Least privilege, as written: no wildcards, no pod exec, and secrets only through a
// Role in nicpool's own namespace.
func TestRBACHasNoWildcardsExecOrForeignSecrets(t *testing.T) {
	forEachKustomization(t, func(t *testing.T, objs []*unstructured.Unstructured) {
		check := func(kind, name string, rules []rbacv1.PolicyRule) {
			for _, r := range rules {
				for _, s := range [][]string{r.Verbs, r.Resources, r.APIGroups, r.NonResourceURLs} {
					if slices.Contains(s, "*") {
						t.Errorf("%s %s has a wildcard: %+v", kind, name, r)
					}
				}
				for _, res := range r.Resources {
					if strings.HasPrefix(res, "pods/") && res != "pods/status" {
						t.Errorf("%s %s grants %s", kind, name, res)
					}
					if res == "secrets" && kind != "Role" {
						t.Errorf("%s %s grants secrets cluster-wide", kind, name)
					}
				}
			}
		}
		for _, o := range kinds(objs, "ClusterRole") {
			check("ClusterRole", o.GetName(), object[rbacv1.ClusterRole](t, objs, "ClusterRole", o.GetName()).Rules)
		}
		for _, o := range kinds(objs, "Role") {
			check("Role", o.GetName(), object[rbacv1.Role](t, objs, "Role", o.GetName()).Rules)
		}
		for _, o := range kinds(objs, "RoleBinding") {
			rb := object[rbacv1.RoleBinding](t, objs, "RoleBinding", o.GetName())
			if rb.RoleRef.Kind != "Role" {
				t.Errorf("RoleBinding %s binds a %s; bind Roles of nicpool's namespace only", rb.Name, rb.RoleRef.Kind)
			}
		}
	})
}

func argValue(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// flagPort is the port of a --flag=PORT or --flag=[HOST]:PORT argument.
func flagPort(t *testing.T, args []string, flag string) int32 {
	t.Helper()
	v := argValue(args, flag)
	if i := strings.LastIndex(v, ":"); i >= 0 {
		v = v[i+1:]
	}
	return int32(atoi(t, v))
}

func hasPort(c corev1.Container, p intstr.IntOrString) bool { return portNumber(c, p) != 0 }

func portNumber(c corev1.Container, p intstr.IntOrString) int32 {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	return 0
}

func servicePort(svc *corev1.Service, port int32) bool {
	return slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port })
}

func mounted(c corev1.Container, volume, path string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume && m.MountPath == path })
}

func readOnlyMount(c corev1.Container, volume string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume && m.ReadOnly })
}

func mountsHostPath(c corev1.Container, hostPaths map[string]string, hostPath string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return hostPaths[m.Name] == hostPath })
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}
