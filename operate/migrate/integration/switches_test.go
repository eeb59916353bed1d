package integration

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/operate/migrate"
)

// spiderpool-conf's IPAM switches carried over: the migration reads them from the
// ConfigMap spiderpool's chart installs (here enableIPv6 and enableStatefulSet false),
// prints the chart values and flags to install nicpool with, and decides the running
// pods' annotations as nicpool's webhook with those switches would (a StatefulSet pod
// stamped to take no endpoint over, the pod's IPv6 pools left out). Switches given to
// the command must agree with the ConfigMap; once it is gone (spiderpool uninstalled),
// they are what the migration goes by.
func TestSwitchesFromSpiderpoolConf(t *testing.T) {
	ctx := context.Background()
	c := suite.env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "spiderpool"}}); err != nil {
		t.Fatal(err)
	}
	conf := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "spiderpool", Name: migrate.SpiderpoolConf},
		Data: map[string]string{
			"clusterNetwork": "macvlan-vlan0",
			"conf.yml":       "ipamUnixSocketPath: /var/run/spidernet/spiderpool.sock\nenableIPv4: true\nenableIPv6: false\nenableStatefulSet: false\nenableKubevirtStaticIP: false\n",
		},
	}
	if err := c.Create(ctx, conf); err != nil {
		t.Fatal(err)
	}
	spiderpoolPool(t, "conf-v4", "10.160.0.0/24", "", "10.160.0.10-10.160.0.50", map[string]map[string]string{})
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: "conf-db"},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "conf-db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "conf-db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}},
		},
	}
	if err := c.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	pod := runningPod(t, "conf-db-0", map[string]string{annotations.IPPool: `{"ipv4":["conf-v4"],"ipv6":["conf-v6"]}`},
		[]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set.Name, UID: set.UID, Controller: ptr.To(true)}})
	wantPod := map[string]string{
		annotations.IPPools:     `[{"interface":"eth0","ipv4":["conf-v4"]}]`,
		annotations.EndpointUID: annotations.NoEndpoint,
	}
	checkPlan := func(t *testing.T, plan migrate.Plan, source string) {
		t.Helper()
		if plan.Switches.Source != source {
			t.Errorf("switches read from %q, want %q", plan.Switches.Source, source)
		}
		install := strings.Join(plan.Switches.Install(), "\n")
		for _, want := range []string{
			"--set ipam.enableIPv6=false --set ipam.enableStatefulSet=false",
			"kustomize: --enable-ipv6=false --enable-stateful-set=false in the args of the nicpool-webhook Deployment and of the nicpool-ipamd DaemonSet",
			"kubectl nicpool migrate from-spiderpool --apply --enable-ipv6=false --enable-stateful-set=false",
		} {
			if !strings.Contains(install, want) {
				t.Errorf("how to install nicpool lacks %q:\n%s", want, install)
			}
		}
		var got map[string]string
		for _, pc := range plan.Pods {
			if pc.Pod == appNS+"/"+pod.Name {
				got = pc.Set
			}
		}
		for k, v := range wantPod {
			if got[k] != v {
				t.Errorf("the migration writes %s=%q on %s, want %q (all it sets: %v)", k, got[k], pod.Name, v, got)
			}
		}
		for _, b := range plan.Blockers {
			if strings.Contains(b.Message, "switches") {
				t.Errorf("blocked: %s", b.Message)
			}
		}
	}

	t.Run("read from spiderpool-conf", func(t *testing.T) {
		plan, err := migrate.Run(ctx, c, discovery(t), migrate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, plan, "spiderpool/spiderpool-conf")
		out, errOut, _ := kubectl(t, "migrate", "from-spiderpool", "--dry-run")
		for _, want := range []string{
			"spiderpool's IPAM switches (read from ConfigMap spiderpool/spiderpool-conf):",
			"enableStatefulSet: false (--enable-stateful-set=false)",
			"Install nicpool with these switches:",
			"helm: helm install nicpool <chart> -n nicpool-system --set ipam.enableIPv6=false --set ipam.enableStatefulSet=false",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the dry run does not print %q:\n%s%s", want, out, errOut)
			}
		}
	})
	t.Run("switches given that disagree", func(t *testing.T) {
		plan, err := migrate.Run(ctx, c, discovery(t), migrate.Options{SwitchesGiven: true})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, b := range plan.Blockers {
			found = found || strings.Contains(b.Message, "differ from spiderpool/spiderpool-conf's (--enable-ipv4=true --enable-ipv6=false --enable-stateful-set=false)")
		}
		if !found {
			t.Errorf("switches that differ from spiderpool-conf's do not block: %v", plan.Blockers)
		}
	})
	t.Run("spiderpool-conf gone: the switches given", func(t *testing.T) {
		if err := c.Delete(ctx, conf); err != nil {
			t.Fatal(err)
		}
		plan, err := migrate.Run(ctx, c, discovery(t), migrate.Options{Switches: ipamconf.Switches{NoIPv6: true, NoStatefulSet: true}, SwitchesGiven: true})
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, plan, "")
	})
}
