// Package v1alpha1 is the API of applications placed on the clusters of a management cluster
// (docs/placement.md): the Go types are the definition, and the CRD
// (kustomize-components/applications/crd) and the deep copies are generated from them by
// controller-gen (`go generate ./api/...`).
//
// +kubebuilder:object:generate=true
// +groupName=apps.cluster-init.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=. crd output:crd:artifacts:config=../../../kustomize-components/applications/crd

var (
	// GroupVersion is the group and version of the API.
	GroupVersion = schema.GroupVersion{Group: "apps.cluster-init.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the API's types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
