package endpoint

import (
	"reflect"
	"testing"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

func TestAttachmentsRoundTrip(t *testing.T) {
	ep := &v2beta1.SpiderEndpoint{}
	want := map[string]Attachment{"eth0": {ContainerID: "c1", Network: "macvlan"}, "net1": {ContainerID: "c1", Network: "second"}}
	SetAttachments(ep, want)
	if got := ep.Annotations[AttachmentsAnnotation]; got != `{"eth0":{"containerID":"c1","network":"macvlan"},"net1":{"containerID":"c1","network":"second"}}` {
		t.Errorf("annotation = %s", got)
	}
	if got := Attachments(ep); !reflect.DeepEqual(got, want) {
		t.Errorf("Attachments = %v, want %v", got, want)
	}
	SetAttachments(ep, nil)
	if _, ok := ep.Annotations[AttachmentsAnnotation]; ok {
		t.Errorf("no attachments left: the annotation should be gone, is %q", ep.Annotations[AttachmentsAnnotation])
	}
}

// A value written by hand (the annotation is on an object ipamd's writers own, but a
// bad value must not stop DEL or GC) counts as no attachment.
func TestAttachmentsMalformedIsEmpty(t *testing.T) {
	for _, v := range []string{"", "{", "[]", `{"eth0":"c1"}`, "null"} {
		ep := &v2beta1.SpiderEndpoint{}
		ep.Annotations = map[string]string{AttachmentsAnnotation: v}
		if got := Attachments(ep); len(got) != 0 {
			t.Errorf("Attachments of %q = %v, want none", v, got)
		}
	}
	if got := Attachments(nil); len(got) != 0 {
		t.Errorf("Attachments(nil) = %v, want none", got)
	}
}

func TestEqual(t *testing.T) {
	a := &v2beta1.SpiderEndpoint{}
	a.Status.Current.UID = "u1"
	b := a.DeepCopy()
	b.ResourceVersion = "9" // not what ipamd records
	if !Equal(a, b) {
		t.Error("endpoints differing only in metadata ipamd does not record should be equal")
	}
	SetAttachments(b, map[string]Attachment{"eth0": {ContainerID: "c"}})
	if Equal(a, b) {
		t.Error("an added attachment should make the endpoints differ")
	}
}
