package cachestrings

import (
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/types"
)

func TestOwnKeepsValuesInOneAllocation(t *testing.T) {
	name, uid, empty, rv := "pod-1", "0b5c6d3e-uid", "", "42"
	Own(&name, &uid, &empty, &rv)
	if name != "pod-1" || uid != "0b5c6d3e-uid" || empty != "" || rv != "42" {
		t.Fatalf("Own changed the values: %q %q %q %q", name, uid, empty, rv)
	}
	if unsafe.StringData(uid) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(name)), len(name))) {
		t.Error("Own did not lay the values out one after the other in one allocation")
	}
}

func TestSharedReturnsOneCopyOfEqualValues(t *testing.T) {
	a := string([]byte("namespace-a"))
	b := string([]byte("namespace-a"))
	if unsafe.StringData(a) == unsafe.StringData(b) {
		t.Fatal("test setup: the two values share their bytes already")
	}
	sa, sb := Shared(a), Shared(b)
	if sa != "namespace-a" || unsafe.StringData(sa) != unsafe.StringData(sb) {
		t.Errorf("Shared(%q) and Shared(%q) are not one copy", a, b)
	}
	if Shared("") != "" {
		t.Error(`Shared("") is not ""`)
	}
}

func TestOwnWithUIDKeepsTheUIDWithTheOtherValues(t *testing.T) {
	uid, name := types.UID("0b5c6d3e-uid"), "pod-1"
	OwnWithUID(&uid, &name)
	if uid != "0b5c6d3e-uid" || name != "pod-1" {
		t.Fatalf("OwnWithUID changed the values: %q %q", uid, name)
	}
	if unsafe.StringData(string(uid)) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(name)), len(name))) {
		t.Error("OwnWithUID did not lay the UID out in the same allocation as the other values")
	}
}
