package testenv

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// OpenStackServer is a CAPO OpenStackServer the vendored CRD admits (not created), as CAPO makes
// one for a machine: tests of what reads or changes them start from it.
func OpenStackServer(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "OpenStackServer",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"flavor":      "m1.large",
			"identityRef": map[string]any{"cloudName": "testbed", "name": "management-cloud-config"},
			"image":       map[string]any{"filter": map[string]any{"name": "kindest-node-v1.37.0"}},
			"sshKeyName":  "testbed",
			"ports":       []any{map[string]any{"network": map[string]any{"id": "8910ca2b-cd27-495f-a3a8-abdf7a1862db"}}},
		},
	}}
}
