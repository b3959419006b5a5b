// Package adopt decides whether an existing cluster may become an environment's management
// cluster (bootstrap ENV --kubeconfig FILE --adopt). cluster-init installs Flux, cert-manager and
// Cluster API into it and removes them at cleanup: a cluster that runs any of them installed by
// someone else is refused, naming what and who installed it, unless the user says to take them
// over.
package adopt

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/names"
)

// fluxNamespaceLabel is the label kustomize-controller sets on what a Kustomization applied: the
// Kustomization's namespace.
const fluxNamespaceLabel = "kustomize.toolkit.fluxcd.io/namespace"

// product is an installation cluster-init makes, known by one of its CRDs.
type product struct {
	name string
	crds []string
}

// products are what cluster-init installs into a management cluster.
func products() []product {
	return []product{
		{"Flux", []string{"kustomizations.kustomize.toolkit.fluxcd.io", "helmreleases.helm.toolkit.fluxcd.io", "gitrepositories.source.toolkit.fluxcd.io"}},
		{"cert-manager", []string{"certificates.cert-manager.io"}},
		{"Cluster API", []string{"clusters.cluster.x-k8s.io", "providers.clusterctl.cluster.x-k8s.io"}},
	}
}

// Installation is something the cluster runs that cluster-init did not install.
type Installation struct {
	Product string // Flux, cert-manager, Cluster API
	CRD     string // the CRD that shows it
	By      string // who applied it, as its managed fields or labels say ("" if unknown)
}

func (i Installation) String() string {
	s := fmt.Sprintf("%s (CRD %s", i.Product, i.CRD)
	if i.By != "" {
		s += ", installed by " + i.By
	}
	return s + ")"
}

// Foreign lists what the cluster runs of Flux, cert-manager and Cluster API that cluster-init
// did not install: by its own applier (field manager names.FieldManager) or through the units of
// its release (applied by Flux from a Kustomization in names.Namespace).
func Foreign(ctx context.Context, c client.Reader) ([]Installation, error) {
	var out []Installation
	for _, p := range products() {
		for _, name := range p.crds {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("look for %s in the cluster (CRD %s): %w", p.name, name, err)
			}
			if !ours(crd) {
				out = append(out, Installation{Product: p.name, CRD: name, By: installer(crd)})
			}
			break // one CRD tells who installed the product
		}
	}
	return out, nil
}

// ours: cluster-init applied the CRD, itself or through its release's units.
func ours(crd *apiextensionsv1.CustomResourceDefinition) bool {
	if crd.Labels[fluxNamespaceLabel] == names.Namespace {
		return true
	}
	return slices.ContainsFunc(crd.ManagedFields, func(m metav1.ManagedFieldsEntry) bool { return m.Manager == names.FieldManager })
}

// installer names who applied the CRD: the labels tools set, else the first field manager.
func installer(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, key := range []string{"app.kubernetes.io/managed-by", "helm.toolkit.fluxcd.io/name", fluxNamespaceLabel} {
		if v := crd.Labels[key]; v != "" {
			return fmt.Sprintf("%s (label %s)", v, key)
		}
	}
	var managers []string
	for _, m := range crd.ManagedFields {
		if !slices.Contains(managers, m.Manager) {
			managers = append(managers, m.Manager)
		}
	}
	return strings.Join(managers, ", ")
}

// Refusal is the error for a cluster that runs foreign installations.
func Refusal(foreign []Installation) error {
	list := make([]string, len(foreign))
	for i, f := range foreign {
		list[i] = "  " + f.String()
	}
	return fmt.Errorf("the cluster runs what cluster-init did not install:\n%s\ncluster-init would take it over, reconcile it to its own versions and delete it at cleanup: "+
		"remove it first, or give --take-over to let cluster-init own it", strings.Join(list, "\n"))
}
