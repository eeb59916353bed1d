package cluster

import (
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkAttachmentDefinitionCRD is the CRD Multus reads secondary networks from,
// built from the network-attachment-definition-client types: a namespaced
// NetworkAttachmentDefinition whose spec.config is a CNI configuration string.
func NetworkAttachmentDefinitionCRD() *apiextensionsv1.CustomResourceDefinition {
	group := nadv1.SchemeGroupVersion.Group
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "network-attachment-definitions." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural:     "network-attachment-definitions",
				Singular:   "network-attachment-definition",
				Kind:       "NetworkAttachmentDefinition",
				ListKind:   "NetworkAttachmentDefinitionList",
				ShortNames: []string{"net-attach-def"},
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name:    nadv1.SchemeGroupVersion.Version,
				Served:  true,
				Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {
							Type:       "object",
							Properties: map[string]apiextensionsv1.JSONSchemaProps{"config": {Type: "string"}},
						},
					},
				}},
			}},
		},
	}
}
