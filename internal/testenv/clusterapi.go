package testenv

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ComingUp is the name of a Cluster that CreateProvisioned leaves provisioning.
const ComingUp = "coming-up"

// CreateProvisioned creates the objects; a Cluster is then given the status of one Cluster API
// provisioned (clusterctl saves no namespace with a cluster still coming up), unless it is named
// ComingUp, and a DockerCluster or a Machine after it is owned by it, as Cluster API does
// (clusterctl saves what a cluster owns, and the Secrets named after it).
func CreateProvisioned(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	var owner *clusterv1.Cluster
	for _, o := range objs {
		if owner != nil {
			switch u := o.(type) {
			case *unstructured.Unstructured:
				if u.GetKind() == "DockerCluster" {
					u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: owner.Name, UID: owner.UID}})
				}
			case *clusterv1.Machine:
				u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: owner.Name, UID: owner.UID}})
			}
		}
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		cl, ok := o.(*clusterv1.Cluster)
		if ok {
			owner = cl
		}
		if ok && cl.Name != ComingUp {
			cl.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
			cl.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue,
				Reason: "Initialized", LastTransitionTime: metav1.Now()}}
			if err := c.Status().Update(t.Context(), cl); err != nil {
				t.Fatalf("provision cluster %s: %v", cl.Name, err)
			}
		}
	}
}

// ClusterctlProvider is clusterctl's inventory entry of a provider.
func ClusterctlProvider(name, ns, providerName, typ string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Provider",
		"metadata":     map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"clusterctl.cluster.x-k8s.io": "", "cluster.x-k8s.io/provider": name}},
		"providerName": providerName, "type": typ, "version": "v1.14.0",
	}}
}

// ClusterctlProviders are the namespaces and inventory of the kubeadm-capd providers, as
// clusterctl move reads them.
func ClusterctlProviders() []client.Object {
	var out []client.Object
	for _, ns := range []string{"capi-system", "capi-kubeadm-bootstrap-system", "capi-kubeadm-control-plane-system", "capd-system"} {
		out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	return append(out, ClusterctlProvider("cluster-api", "capi-system", "cluster-api", "CoreProvider"),
		ClusterctlProvider("bootstrap-kubeadm", "capi-kubeadm-bootstrap-system", "kubeadm", "BootstrapProvider"),
		ClusterctlProvider("control-plane-kubeadm", "capi-kubeadm-control-plane-system", "kubeadm", "ControlPlaneProvider"),
		ClusterctlProvider("infrastructure-docker", "capd-system", "docker", "InfrastructureProvider"))
}

// ClusterAPIObjects is what Cluster API keeps of one cluster: the Cluster, its DockerCluster, and
// its certificate authority (whose key is caKey) and kubeconfig Secrets.
func ClusterAPIObjects(ns, name, caKey string) []client.Object {
	return []client.Object{
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerCluster", Name: name}}},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster",
			"metadata": map[string]any{"namespace": ns, "name": name}, "spec": map[string]any{}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-ca", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Data: map[string][]byte{"tls.key": []byte(caKey), "tls.crt": []byte("cert")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Data: map[string][]byte{"value": []byte("kubeconfig of " + name)}},
	}
}
