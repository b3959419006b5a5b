package adopt_test

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/adopt"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// The test cluster has Flux's and Cluster API's CRDs, installed by envtest: someone else's. Once
// cluster-init's units own them (the label Flux sets), the cluster may be adopted.
func TestForeignInstallationsAreNamedUntilOwned(t *testing.T) {
	c := testenv.Start(t, "adopt")
	ctx := t.Context()
	foreign, err := adopt.Foreign(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	var products []string
	for _, f := range foreign {
		products = append(products, f.Product)
	}
	if got := strings.Join(products, ","); got != "Flux,Cluster API" {
		t.Fatalf("foreign installations: %v, want Flux and Cluster API", foreign)
	}
	msg := adopt.Refusal(foreign).Error()
	for _, want := range []string{"CRD kustomizations.kustomize.toolkit.fluxcd.io", "CRD clusters.cluster.x-k8s.io", "--take-over"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, msg)
		}
	}

	// Cluster API applied by a unit of cluster-init's release; Flux by cluster-init's applier.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "clusters.cluster.x-k8s.io"}, crd); err != nil {
		t.Fatal(err)
	}
	crd.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/namespace": names.Namespace}
	if err := c.Client.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	flux := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "kustomizations.kustomize.toolkit.fluxcd.io"}, flux); err != nil {
		t.Fatal(err)
	}
	flux.Annotations = map[string]string{"cluster-init.dev/test": "owned"}
	if err := c.Client.Update(ctx, flux, client.FieldOwner(names.FieldManager)); err != nil {
		t.Fatal(err)
	}
	if foreign, err = adopt.Foreign(ctx, c.Client); err != nil || len(foreign) != 0 {
		t.Fatalf("after cluster-init owns them: %v, %v", foreign, err)
	}
}
