package daemon_test

import (
	"context"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/daemon"
	"github.com/nicpool/nicpool/ipamd/metrics"
)

// An address of a live pod whose record vanished (its block deleted by someone with
// override on IPBlocks) can be given to another pod while the first still uses it.
// ipamd notices on its node: on the second check that finds it, it logs it, counts it
// in nicpool_ipamd_unrecorded_addresses and records a Warning Event on the pod that
// names the address, the pool and what to do. Once the pod is gone, so is the alarm.
func TestVanishedRecordOfALivePodIsReported(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "vanish")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("vanish", "10.83.0.0/16", []string{"10.83.0.1-10.83.0.20"}))
	d, _ := startDaemon(t, "vanish-node")
	pod := createPod(t, "vanish", "web", "vanish-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["vanish"]}]`))
	got := addAll(t, d.Service, pod, "eth0")
	fixtures.Eventually(t, "the pod's endpoint in ipamd's cache", func() bool {
		n, err := d.CheckRecords(ctx)
		if err != nil || n != 0 {
			t.Fatalf("check before anything vanished: %d unrecorded, %v", n, err)
		}
		var ep v2beta1.SpiderEndpoint
		return d.Cache.Get(ctx, client.ObjectKeyFromObject(pod), &ep) == nil
	})
	if err := env.Client.DeleteAllOf(ctx, &ipamv1alpha1.IPBlock{}, client.MatchingFields{ipamv1alpha1.FieldPool: "vanish"}); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "ipamd to count the vanished record", func() bool {
		n, err := d.CheckRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	var m dto.Metric
	if err := metrics.UnrecordedAddresses.Write(&m); err != nil || m.GetGauge().GetValue() != 1 {
		t.Errorf("nicpool_ipamd_unrecorded_addresses = %v (%v); want 1", m.GetGauge().GetValue(), err)
	}
	addr := strings.Split(got["eth0"], "/")[0]
	fixtures.Eventually(t, "an AddressUnrecorded event on the pod", func() bool {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace("vanish")); err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.InvolvedObject.UID == pod.UID && e.Reason == daemon.ReasonAddressUnrecorded && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Message, addr) && strings.Contains(e.Message, "pool vanish") && strings.Contains(e.Message, "kubectl nicpool record "+addr+" --force") {
				return true
			}
		}
		return false
	})

	deletePod(t, pod)
	if _, err := d.Service.Release(ctx, delReq(pod, "eth0", "c-"+string(pod.UID))); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "the alarm to end with the pod", func() bool {
		n, err := d.CheckRecords(ctx)
		return err == nil && n == 0
	})
	checkInvariants(t, true)
}
