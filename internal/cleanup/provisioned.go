package cleanup

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// bookkeeping are the status fields of an infrastructure object that say how reconciling went,
// not what it created: an object whose status holds only these has recorded no resource.
var bookkeeping = map[string]bool{
	"conditions": true, "ready": true, "initialization": true, "failureDomains": true,
	"failureReason": true, "failureMessage": true, "observedGeneration": true,
	"v1beta2": true, "deprecated": true,
}

// recordedResources says what a Cluster's infrastructure provider has recorded as created for it:
// the resources in the status of its infrastructure cluster, and the provider IDs and
// infrastructure of its machines. Empty: the provider never created anything (it could not reach
// its cloud, say), and nothing is left behind when the Cluster's objects go without it.
func recordedResources(ctx context.Context, c client.Reader, namespace, name string) ([]string, error) {
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cl); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	var found []string
	if cl.Status.Initialization.InfrastructureProvisioned != nil && *cl.Status.Initialization.InfrastructureProvisioned {
		found = append(found, fmt.Sprintf("Cluster %s: infrastructure provisioned", name))
	}
	refs := []clusterv1.ContractVersionedObjectReference{cl.Spec.InfrastructureRef}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return nil, fmt.Errorf("list the Machines of %s: %w", name, err)
	}
	for _, m := range machines.Items {
		if m.Spec.ProviderID != "" {
			found = append(found, fmt.Sprintf("Machine %s: %s", m.Name, m.Spec.ProviderID))
		}
		refs = append(refs, m.Spec.InfrastructureRef)
	}
	for _, ref := range refs {
		if !ref.IsDefined() {
			continue
		}
		obj, err := external.GetObjectFromContractVersionedRef(ctx, c, ref, namespace)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s %s: %w", ref.Kind, ref.Name, err)
		}
		if fields := resourceFields(obj); len(fields) > 0 {
			found = append(found, fmt.Sprintf("%s %s: status.%s", ref.Kind, ref.Name, strings.Join(fields, ", status.")))
		}
	}
	return found, nil
}

// resourceFields are the status fields of an infrastructure object that are not bookkeeping: what
// it records as created (CAPO: network, router, bastion, load balancer; a machine: its instance).
func resourceFields(obj *unstructured.Unstructured) []string {
	status, _, _ := unstructured.NestedMap(obj.Object, "status")
	var fields []string
	for k, v := range status {
		if bookkeeping[k] || v == nil {
			continue
		}
		switch v := v.(type) {
		case string:
			if v == "" {
				continue
			}
		case bool:
			if !v {
				continue
			}
		case []any:
			if len(v) == 0 {
				continue
			}
		case map[string]any:
			if len(v) == 0 {
				continue
			}
		}
		fields = append(fields, k)
	}
	sort.Strings(fields)
	return fields
}
