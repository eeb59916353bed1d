package endpoint

import (
	"encoding/json"
	"reflect"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// AttachmentsAnnotation is ipamd's record, on a SpiderEndpoint, of which CNI
// attachment holds each interface: {"eth0":{"containerID":"…","network":"…"}}. CNI GC
// compares it with the runtime's valid attachments, and a DEL for an older container
// of the same interface (a sandbox replaced meanwhile) releases nothing.
const AttachmentsAnnotation = "ipam.nicpool.io/attachments"

// Attachment is one value of AttachmentsAnnotation.
type Attachment struct {
	ContainerID string `json:"containerID"`
	Network     string `json:"network"`
}

// Attachments decodes AttachmentsAnnotation; a malformed value counts as empty.
func Attachments(ep *v2beta1.SpiderEndpoint) map[string]Attachment {
	out := map[string]Attachment{}
	if ep == nil {
		return out
	}
	if v, ok := ep.Annotations[AttachmentsAnnotation]; ok {
		if err := json.Unmarshal([]byte(v), &out); err != nil {
			return map[string]Attachment{} // not half of it either
		}
	}
	return out
}

// SetAttachments encodes atts into AttachmentsAnnotation; none removes it.
func SetAttachments(ep *v2beta1.SpiderEndpoint, atts map[string]Attachment) {
	if len(atts) == 0 {
		delete(ep.Annotations, AttachmentsAnnotation)
		return
	}
	b, _ := json.Marshal(atts)
	if ep.Annotations == nil {
		ep.Annotations = map[string]string{}
	}
	ep.Annotations[AttachmentsAnnotation] = string(b)
}

// Equal reports whether writing b over a would change nothing ipamd records: its
// status and annotations.
func Equal(a, b *v2beta1.SpiderEndpoint) bool {
	return reflect.DeepEqual(a.Status, b.Status) && reflect.DeepEqual(a.Annotations, b.Annotations)
}
