package cachestrings

import (
	"testing"
	"unsafe"
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
