package copyvalues_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/copyvalues"
	"cluster-init.dev/cluster-init/internal/testenv"
)

func TestCopyValuesSecretsAndSourceIntoTheManagementCluster(t *testing.T) {
	from, to := testenv.Start(t, "bootstrap"), testenv.Start(t, "management")
	ctx := t.Context()
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-init"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "cluster-init-values", Labels: map[string]string{"reconcile.fluxcd.io/watch": "Enabled"}}, Data: map[string]string{"values.yaml": "cluster: {name: m}\n"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "cluster-init-overrides"}, Data: map[string]string{"values.yaml": "{}\n"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "cluster-init-source"}, Data: map[string]string{"values.yaml": "source: {type: oci}\n"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "cluster-init-secrets"}, Data: map[string][]byte{"secrets.yaml": []byte("credentials: {git: {password: p}}\n")}},
	}
	for _, o := range objs {
		if err := from.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // a second run changes nothing and does not fail
		if _, err := copyvalues.Run(ctx, from, to, "cluster-init"); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{}
	if err := to.Client.Get(ctx, client.ObjectKey{Namespace: "cluster-init", Name: "cluster-init-values"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["values.yaml"] != "cluster: {name: m}\n" || cm.Labels["reconcile.fluxcd.io/watch"] != "Enabled" {
		t.Errorf("copied ConfigMap: %v %v", cm.Data, cm.Labels)
	}
	s := &corev1.Secret{}
	if err := to.Client.Get(ctx, client.ObjectKey{Namespace: "cluster-init", Name: "cluster-init-secrets"}, s); err != nil {
		t.Fatal(err)
	}
	if string(s.Data["secrets.yaml"]) != "credentials: {git: {password: p}}\n" {
		t.Errorf("copied Secret data differs")
	}
}
