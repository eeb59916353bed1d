// Package output defines what `kubectl nicpool … -o json|yaml` prints: versioned
// lists in Kubernetes' shape (apiVersion, kind, items, each item with metadata), so
// that scripts read them with jsonpath, go-template, custom-columns or jq, and
// cli-runtime's printers print them. The shape of nicpool.io/v1alpha1 is stable:
// fields are added, never renamed or removed, within the version.
package output

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/operate/inspect"
	"github.com/nicpool/nicpool/operate/migrate"
	"github.com/nicpool/nicpool/operate/repair"
)

// GroupVersion is the apiVersion of every list the commands print.
var GroupVersion = schema.GroupVersion{Group: "nicpool.io", Version: "v1alpha1"}

// Kinds of the items, each printed in a list of the kind with "List" appended.
const (
	KindPoolUsage        = "PoolUsage"
	KindAddressHolder    = "AddressHolder"
	KindPodAddresses     = "PodAddresses"
	KindViolation        = "Violation"
	KindReleaseDecision  = "ReleaseDecision"
	KindRecording        = "Recording"
	KindStatusCheck      = "StatusCheck"
	KindComponentVersion = "ComponentVersion"
	// KindMigrationPlan is printed alone, not in a list.
	KindMigrationPlan = "MigrationPlan"
)

// PoolUsage is one pool's usage (kubectl nicpool pools); metadata.name is the pool.
type PoolUsage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            inspect.PoolReport `json:"status"`
}

// AddressHolder is one record of an address (kubectl nicpool who); metadata.name is
// the address.
type AddressHolder struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            inspect.Holding `json:"status"`
}

// PodAddresses is what every interface of a pod was given (kubectl nicpool pod);
// metadata is the pod's namespace and name.
type PodAddresses struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            inspect.PodReport `json:"status"`
}

// Violation is one broken invariant (kubectl nicpool check) with its repair;
// metadata.name identifies what it concerns (kind, pool and address, or endpoint) and
// is the same in every report that finds it; metadata.creationTimestamp is when the
// check that found it ran.
type Violation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            invariants.Violation `json:"status"`
	// Repair is the command that repairs the violation, or says why none can.
	Repair string `json:"repair,omitempty"`
}

// ReleaseDecision is what release did with one record (kubectl nicpool release);
// metadata.name is the address.
type ReleaseDecision struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            repair.Decision `json:"status"`
}

// Recording is what record did with the address a pod's endpoint lists (kubectl
// nicpool record); metadata.name is the address.
type Recording struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            repair.Recording `json:"status"`
}

// StatusCheck is one check of kubectl nicpool status; metadata.name names it
// ("webhook-reachable", "ipamd/node-1", …).
type StatusCheck struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            inspect.Check `json:"status"`
}

// ComponentVersion is what one component runs (kubectl nicpool version);
// metadata.name is the component: client, webhook, ipamd or cni-plugin.
type ComponentVersion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            inspect.ComponentVersions `json:"status"`
}

// DeepCopyObject implements runtime.Object.
func (p *ComponentVersion) DeepCopyObject() runtime.Object { return deepCopy(p) }

// MigrationPlan is what kubectl nicpool migrate from-spiderpool found and does;
// metadata.name is "from-spiderpool".
type MigrationPlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            migrate.Plan `json:"status"`
}

// DeepCopyObject implements runtime.Object.
func (p *MigrationPlan) DeepCopyObject() runtime.Object { return deepCopy(p) }

// List is a list of items of one kind, as every command prints it.
type List[T any, PT interface {
	*T
	runtime.Object
}] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []T `json:"items"`
}

// Lists of each kind.
type (
	PoolUsageList        = List[PoolUsage, *PoolUsage]
	AddressHolderList    = List[AddressHolder, *AddressHolder]
	PodAddressesList     = List[PodAddresses, *PodAddresses]
	ViolationList        = List[Violation, *Violation]
	ReleaseDecisionList  = List[ReleaseDecision, *ReleaseDecision]
	RecordingList        = List[Recording, *Recording]
	StatusCheckList      = List[StatusCheck, *StatusCheck]
	ComponentVersionList = List[ComponentVersion, *ComponentVersion]
)

// NewList returns a list of items of kind, every item typed.
func NewList[T any, PT interface {
	*T
	runtime.Object
}](kind string, items []T) *List[T, PT] {
	for i := range items {
		PT(&items[i]).GetObjectKind().SetGroupVersionKind(GroupVersion.WithKind(kind))
	}
	if items == nil {
		items = []T{}
	}
	return &List[T, PT]{TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: kind + "List"}, Items: items}
}

// The views are plain data: a copy is their JSON read back.
func deepCopy[T any](in *T) *T {
	data, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		panic(err)
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *List[T, PT]) DeepCopyObject() runtime.Object { return deepCopy(l) }

// DeepCopyObject implements runtime.Object.
func (p *PoolUsage) DeepCopyObject() runtime.Object { return deepCopy(p) }

// DeepCopyObject implements runtime.Object.
func (p *AddressHolder) DeepCopyObject() runtime.Object { return deepCopy(p) }

// DeepCopyObject implements runtime.Object.
func (p *PodAddresses) DeepCopyObject() runtime.Object { return deepCopy(p) }

// DeepCopyObject implements runtime.Object.
func (p *Violation) DeepCopyObject() runtime.Object { return deepCopy(p) }

// DeepCopyObject implements runtime.Object.
func (p *ReleaseDecision) DeepCopyObject() runtime.Object { return deepCopy(p) }

// DeepCopyObject implements runtime.Object.
func (p *StatusCheck) DeepCopyObject() runtime.Object { return deepCopy(p) }

// DeepCopyObject implements runtime.Object.
func (p *Recording) DeepCopyObject() runtime.Object { return deepCopy(p) }
