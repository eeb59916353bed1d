package endpoint

import (
	"encoding/json"
	"reflect"
	"strings"

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

// PreviousUIDsAnnotation is the pod UIDs a SpiderEndpoint belonged to before its
// current one, oldest first, separated by spaces: each takeover appends the UID it
// takes the endpoint from. The API server's endpoint policy holds ipamd to it: the
// list only grows, and an endpoint never goes back to a UID on it, so no sequence of
// writes by another node's ipamd hands a live pod's endpoint back to that pod with
// other contents.
const PreviousUIDsAnnotation = "ipam.nicpool.io/previous-uids"

// PreviousUIDs decodes PreviousUIDsAnnotation.
func PreviousUIDs(ep *v2beta1.SpiderEndpoint) []string {
	if ep == nil {
		return nil
	}
	return strings.Fields(ep.Annotations[PreviousUIDsAnnotation])
}

// AppendPreviousUID records that ep no longer belongs to pod UID uid.
func AppendPreviousUID(ep *v2beta1.SpiderEndpoint, uid string) {
	if uid == "" {
		return
	}
	if ep.Annotations == nil {
		ep.Annotations = map[string]string{}
	}
	if v := ep.Annotations[PreviousUIDsAnnotation]; v != "" {
		ep.Annotations[PreviousUIDsAnnotation] = v + " " + uid
		return
	}
	ep.Annotations[PreviousUIDsAnnotation] = uid
}

// Deletable reports whether the ipamd of node may delete ep, as the endpoint policy
// has it: an endpoint of that node (or of none) that was never taken over. Deleting
// one with previous UIDs would let its name start a fresh history; the garbage
// collector deletes those once their pod is gone.
func Deletable(ep *v2beta1.SpiderEndpoint, node string) bool {
	n := ep.Status.Current.Node
	return (n == "" || n == node) && len(PreviousUIDs(ep)) == 0
}
