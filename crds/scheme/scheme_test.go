package scheme_test

import (
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/scheme"
)

func TestNewKnowsNicpoolsKindsAndWhatIsAdded(t *testing.T) {
	for name, c := range map[string]struct {
		s     *runtime.Scheme
		known []runtime.Object
		not   []schema.GroupVersionKind
	}{
		"base": {
			s:     scheme.New(),
			known: []runtime.Object{&corev1.Pod{}, &v2beta1.SpiderIPPool{}, &v2beta1.SpiderEndpoint{}, &v2beta1.SpiderReservedIP{}, &ipamv1alpha1.IPBlock{}},
			not:   []schema.GroupVersionKind{nadv1.SchemeGroupVersion.WithKind("NetworkAttachmentDefinition")},
		},
		"with Multus": {
			s:     scheme.New(nadv1.AddToScheme),
			known: []runtime.Object{&corev1.Pod{}, &ipamv1alpha1.IPBlock{}, &nadv1.NetworkAttachmentDefinition{}},
		},
	} {
		for _, obj := range c.known {
			if _, _, err := c.s.ObjectKinds(obj); err != nil {
				t.Errorf("%s: %T unknown: %v", name, obj, err)
			}
		}
		for _, gvk := range c.not {
			if c.s.Recognizes(gvk) {
				t.Errorf("%s: knows %s it was not given", name, gvk)
			}
		}
	}
}
