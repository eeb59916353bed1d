package pod

import (
	"context"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	jsoniter "github.com/json-iterator/go"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Handler serves the pod mutating webhook. It decodes only the pod's metadata and
// answers with a JSON patch of the annotations, so the cost of a request is the
// decision. That the result stays as it left it is checked by the API server itself
// (the pods.nicpool.io ValidatingAdmissionPolicy of webhook/configs), without a
// second call.
type Handler struct {
	Admission *Admission
	// Ready reports whether the views are synced; until then requests fail with 503
	// (and the API server retries or fails the create) instead of being denied for
	// pools the views have not seen yet. Nil means always ready.
	Ready func() bool
}

var _ admission.Handler = &Handler{}

var podKind = schema.GroupKind{Kind: "Pod"}

// podMeta is the part of a Pod's JSON the decision reads.
type podMeta struct {
	Metadata struct {
		Name            string                  `json:"name"`
		GenerateName    string                  `json:"generateName"`
		Namespace       string                  `json:"namespace"`
		Labels          map[string]string       `json:"labels"`
		Annotations     map[string]string       `json:"annotations"`
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.SubResource != "" || req.Kind.Kind != "Pod" || req.Kind.Group != "" {
		return admission.Allowed("")
	}
	if h.Ready != nil && !h.Ready() {
		return admission.Errored(http.StatusServiceUnavailable, errNotReady)
	}
	var m podMeta
	if err := jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal(req.Object.Raw, &m); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	pod := &Pod{
		Namespace:       req.Namespace,
		Name:            m.Metadata.Name,
		Labels:          m.Metadata.Labels,
		Annotations:     m.Metadata.Annotations,
		OwnerReferences: m.Metadata.OwnerReferences,
	}
	if pod.Namespace == "" {
		pod.Namespace = m.Metadata.Namespace
	}
	name := pod.Name
	if name == "" {
		name = m.Metadata.GenerateName + "*"
	}
	d := h.Admission.Decide(ctx, pod)
	switch {
	case d.Retry != "":
		h.log(ctx, req, pod.Namespace, name).Info("pod denied, retryable", "reason", d.Retry)
		return denied(metav1.Status{Code: http.StatusConflict, Reason: metav1.StatusReasonConflict, Message: d.Retry}, d.Warnings)
	case len(d.Errs) > 0:
		err := apierrors.NewInvalid(podKind, name, d.Errs)
		h.log(ctx, req, pod.Namespace, name).Info("pod denied", "reason", err.ErrStatus.Message)
		return denied(err.ErrStatus, d.Warnings)
	case !d.Changed():
		return admission.Allowed("").WithWarnings(d.Warnings...)
	}
	if log := logf.FromContext(ctx).V(1); log.Enabled() {
		h.log(ctx, req, pod.Namespace, name).V(1).Info("pod resolved", "set", d.Set, "remove", d.Remove)
	}
	return admission.Response{
		Patches:           patch(m.Metadata.Annotations != nil, &d),
		AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true, Warnings: d.Warnings},
	}
}

// log is the logger of one decision; built only when a line is written, as most
// decisions write none.
func (h *Handler) log(ctx context.Context, req admission.Request, namespace, name string) logr.Logger {
	return logf.FromContext(ctx).WithValues("pod", namespace+"/"+name, "dryRun", req.DryRun != nil && *req.DryRun)
}

type notReady struct{}

func (notReady) Error() string {
	return "nicpool webhook is starting: its views of pools and endpoints are not synced yet; retry"
}

var errNotReady error = notReady{}

func denied(s metav1.Status, warnings []string) admission.Response {
	s.Status = metav1.StatusFailure
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &s, Warnings: warnings}}
}

// patch turns the decision into JSON patch operations on metadata.annotations.
func patch(hasAnnotations bool, d *Decision) []jsonpatch.JsonPatchOperation {
	if !hasAnnotations {
		m := make(map[string]string, len(d.Set))
		for _, s := range d.Set {
			m[s.Key] = s.Value
		}
		return []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/annotations", Value: m}}
	}
	ops := make([]jsonpatch.JsonPatchOperation, 0, len(d.Set)+len(d.Remove))
	for _, s := range d.Set {
		ops = append(ops, jsonpatch.JsonPatchOperation{Operation: "add", Path: annotationPointer(s.Key), Value: s.Value})
	}
	for _, k := range d.Remove {
		ops = append(ops, jsonpatch.JsonPatchOperation{Operation: "remove", Path: annotationPointer(k)})
	}
	return ops
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func annotationPointer(key string) string {
	return "/metadata/annotations/" + pointerEscaper.Replace(key)
}
