package gc

import (
	"fmt"
	"testing"
)

// BenchmarkDecide measures the in-memory part of a full pass over the memory goal's
// cluster: 10 pools of 1000 allocated addresses, 10 000 pods, one endpoint per pod
// holding addresses, and 100 StatefulSets. A tenth of the holders are gone.
func BenchmarkDecide(b *testing.B) {
	podName := func(i int) string {
		if i < 500 {
			return fmt.Sprintf("set%d-%d", i/5, i%5)
		}
		return fmt.Sprintf("pod-%d", i)
	}
	var snap Snapshot
	snap.Now = now
	for s := range 100 {
		snap.StatefulSets = append(snap.StatefulSets, statefulSet(fmt.Sprintf("set%d", s), 5))
	}
	for i := range 10000 {
		if i%10 != 9 {
			snap.Pods = append(snap.Pods, pod(podName(i), fmt.Sprintf("uid-%d", i)))
		}
	}
	for p := range 10 {
		var recs []rec
		for a := range 1000 {
			i := p*1000 + a
			name := podName(i)
			recs = append(recs, rec{fmt.Sprintf("10.%d.%d.%d", p, a/250, a%250+1), name, fmt.Sprintf("uid-%d", i), "eth0"})
			snap.Endpoints = append(snap.Endpoints, endpoint(name, fmt.Sprintf("uid-%d", i), "None", ""))
		}
		snap.Records = append(snap.Records, pool(fmt.Sprintf("pool-%d", p), recs...)...)
	}
	var plan Plan
	b.ReportAllocs()
	for b.Loop() {
		plan = Decide(snap, Policy{})
	}
	b.ReportMetric(float64(len(plan.Releases)), "releases/pass")
}
