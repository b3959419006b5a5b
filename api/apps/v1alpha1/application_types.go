package v1alpha1

import (
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApplicationKind is the kind of an Application.
const ApplicationKind = "Application"

// Application is an application placed on the clusters of a management cluster: a path (or a
// Helm chart) of a Flux source and where it runs.
//
// Its name is capped so that "<namespace>.<name>", the label its Flux objects carry, fits a label
// value (63 characters with a namespace of up to 22).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=app
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40",message="an application's name has at most 40 characters"
type Application struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ApplicationSpec   `json:"spec"`
	Status ApplicationStatus `json:"status,omitempty"`
}

// ApplicationSpec is what an Application asks for.
//
// +kubebuilder:validation:XValidation:rule="has(self.path) != has(self.chart)",message="an application is manifests (path) or a Helm chart (chart), one of them"
type ApplicationSpec struct {
	// SourceRef is the Flux source holding the application (its namespace defaults to the
	// Application's).
	SourceRef kustomizev1.CrossNamespaceSourceReference `json:"sourceRef"`
	// Path is a directory of the source with manifests or a kustomization (a Flux Kustomization
	// per cluster).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="a path of the source: no '..'"
	// +optional
	Path string `json:"path,omitempty"`
	// Chart is a Helm chart of the source (a HelmRelease per cluster).
	// +optional
	Chart *Chart `json:"chart,omitempty"`
	// TargetNamespace is the namespace of the clusters the application's objects go to.
	// +optional
	TargetNamespace string `json:"targetNamespace,omitempty"`
	// Interval is how often Flux reconciles the application on each cluster (default 5m).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +optional
	Interval metav1.Duration `json:"interval,omitempty"`
	// Timeout bounds each reconciliation on a cluster (default 5m).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Placement is where the application runs.
	Placement Placement `json:"placement"`
}

// Chart is a Helm chart of the application's source, and its values (cluster.name and
// cluster.namespace are set to each cluster's).
type Chart struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="a path of the source: no '..'"
	Path string `json:"path"`
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Values *apiextensionsv1.JSON `json:"values,omitempty"`
}

// Placement is where the application runs: the clusters named (a name alone in the
// application's namespace, or namespace/name) and those the selector matches.
//
// +kubebuilder:validation:XValidation:rule="has(self.clusters) || has(self.selector)",message="a placement names clusters, has a selector, or both"
type Placement struct {
	// +kubebuilder:validation:items:MinLength=1
	// +optional
	Clusters []string `json:"clusters,omitempty"`
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// PlacementState is the state of an application on one cluster.
// +kubebuilder:validation:Enum=Ready;Progressing;Failed;Missing;Removing
type PlacementState string

// The states of a placement.
const (
	StateReady       PlacementState = "Ready"
	StateProgressing PlacementState = "Progressing"
	StateFailed      PlacementState = "Failed"
	StateMissing     PlacementState = "Missing"  // named, but no such Cluster (or it is being deleted)
	StateRemoving    PlacementState = "Removing" // left the placement: removed once the new placement is ready
)

// PlacementStatus is the application on one cluster.
type PlacementStatus struct {
	Cluster string         `json:"cluster"`
	State   PlacementState `json:"state"`
	// +optional
	Message string `json:"message,omitempty"`
}

// ApplicationStatus is the summed status of an application.
type ApplicationStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	Placements []PlacementStatus `json:"placements,omitempty"`
}

// ApplicationList is a list of Applications.
//
// +kubebuilder:object:root=true
type ApplicationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Application `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Application{}, &ApplicationList{})
}
