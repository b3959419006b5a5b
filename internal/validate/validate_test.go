package validate_test

import (
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/validate"
	"cluster-init.dev/cluster-init/internal/versions"
)

func TestEveryEnvironmentIsValidInEveryContext(t *testing.T) {
	root := testenv.Checkout(t)
	pins, err := versions.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	envs, err := environment.List(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubeadm-capd", "rke2-capd", "kubeadm-capo", "rke2-capo", "workload-clusters/kubeadm-capd-workload"} {
		if !strings.Contains(strings.Join(envs, " "), want) {
			t.Errorf("environment %s is missing (found %v)", want, envs)
		}
	}
	r, err := render.New(root, pins["KUBERNETES_VERSION"], "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range envs {
		t.Run(name, func(t *testing.T) {
			env := testenv.Environment(t, root, name)
			reports, err := validate.Environment(t.Context(), r, render.Options{Env: env})
			if err != nil {
				t.Fatal(err)
			}
			if len(reports) != len(validate.Targets(env)) {
				t.Fatalf("validated %d targets, want %d", len(reports), len(validate.Targets(env)))
			}
			for _, r := range reports {
				if r.Objects == 0 || r.Units == 0 {
					t.Errorf("%s: nothing rendered: %+v", r.Target, r)
				}
			}
		})
	}
}

// The validator finds real problems: an object the vendored schemas reject fails validation.
func TestVendoredObjectsPassAndBrokenOnesFail(t *testing.T) {
	root := testenv.Checkout(t)
	r, err := render.New(root, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	objs, err := r.VendoredObjects(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	v := newValidator(t, objs)
	crds := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds[o.GetName()] = true
		}
		for _, e := range v.Validate(t.Context(), o) {
			t.Errorf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), e)
		}
	}
	for _, want := range []string{
		"kustomizations.kustomize.toolkit.fluxcd.io", "helmreleases.helm.toolkit.fluxcd.io", "ocirepositories.source.toolkit.fluxcd.io",
		"certificates.cert-manager.io", "providers.clusterctl.cluster.x-k8s.io", "clusters.cluster.x-k8s.io",
		"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "rke2controlplanes.controlplane.cluster.x-k8s.io",
		"dockerclusters.infrastructure.cluster.x-k8s.io", "openstackclusters.infrastructure.cluster.x-k8s.io", "images.openstack.k-orc.cloud",
	} {
		if !crds[want] {
			t.Errorf("no vendored CRD %s", want)
		}
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "capi-controller-manager" {
			broken := o.DeepCopy()
			broken.Object["spec"].(map[string]any)["replica"] = 2
			if errs := v.Validate(t.Context(), broken); len(errs) == 0 || !strings.Contains(errs[0].Error(), "replica") {
				t.Errorf("an unknown Deployment field passes: %v", errs)
			}
		}
		if o.GetKind() == "Provider" && o.GetName() == "cluster-api" {
			broken := o.DeepCopy()
			broken.Object["type"] = 12
			if errs := v.Validate(t.Context(), broken); len(errs) == 0 {
				t.Error("a Provider with a numeric type passes")
			}
		}
	}
}
