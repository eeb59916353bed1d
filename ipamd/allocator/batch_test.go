package allocator

import (
	"testing"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

func TestHolds(t *testing.T) {
	rec := v2beta1.PoolIPAllocation{Pod: "ns/p", PodUID: "u", Interface: "net1"}
	for _, tc := range []struct {
		o    Owner
		want bool
	}{
		{Owner{Pod: "ns/p", PodUID: "u", Interface: "net1"}, true},
		{Owner{Pod: "ns/p", PodUID: "u"}, true}, // every interface of the pod
		{Owner{Pod: "ns/p", PodUID: "u", Interface: "eth0"}, false},
		{Owner{Pod: "ns/q", PodUID: "u", Interface: "net1"}, false},
		{Owner{Pod: "other/p", PodUID: "u"}, false},
		{Owner{Pod: "ns/p", PodUID: "v", Interface: "net1"}, false},
		{Owner{PodUID: "u", Interface: "net1"}, false},
		{Owner{Pod: "ns/p", Interface: "net1"}, false},
		{Owner{}, false},
	} {
		if got := tc.o.Holds(rec); got != tc.want {
			t.Errorf("%+v.Holds(%+v) = %v, want %v", tc.o, rec, got, tc.want)
		}
	}
	if !OwnerOf(rec).Holds(rec) {
		t.Error("a record's own owner does not hold it")
	}
}
