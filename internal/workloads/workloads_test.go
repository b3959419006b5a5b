package workloads_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/source"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/values"
	"cluster-init.dev/cluster-init/internal/workloads"
)

// gitSource is what bootstrap --source git gives the management cluster.
var gitSource = map[string]any{"type": "git", "url": "http://git.test/cluster-init.git", "ref": map[string]any{"branch": "main"},
	"secret_ref": "cluster-init-git-auth", "environment": "environment-values/kubeadm-capd"}

// plan renders the management cluster of kubeadm-capd after the pivot, from git, and reads the
// workload clusters of a repository holding the directories of testdata/.
func plan(t *testing.T, dirs ...string) (*workloads.Plan, *render.Renderer, string) {
	t.Helper()
	root := testenv.Checkout(t)
	r, err := render.New(root, "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	// After the pivot: self_managed, from the pivot's state.
	mgmt, err := r.Render(t.Context(), render.Options{Env: testenv.Environment(t, root, "kubeadm-capd"), Context: render.ContextManagement,
		State: []values.Layer{managementstate.State{SelfManaged: true}.Layer()}, Source: gitSource})
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	for _, d := range dirs {
		rel := filepath.Join("clusters/management/workload-clusters", d)
		if err := source.CopyTree(filepath.Join("testdata", rel), filepath.Join(repo, rel)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := workloads.Read(t.Context(), repo, mgmt)
	if err != nil {
		t.Fatal(err)
	}
	return p, r, repo
}

// A workload directory becomes a cluster in the tenant's namespace: its definitions and the units
// that go into it, named after the cluster, reading the platform's source; nothing of the
// management cluster's own components.
func TestAWorkloadDirectoryRendersItsClusterInTheTenantsNamespace(t *testing.T) {
	p, r, repo := plan(t, "wl1")
	if len(p.Tenants) != 1 || p.Tenants[0].Namespace != "workload-clusters" || p.Tenants[0].Path != "./clusters/management/workload-clusters" {
		t.Fatalf("tenants: %+v", p.Tenants)
	}
	if len(p.Clusters) != 1 {
		t.Fatalf("clusters: %v", p.Clusters)
	}
	c := p.Clusters[0]
	if c.Name != "wl1" || c.File != "clusters/management/workload-clusters/wl1/cluster.yaml" {
		t.Errorf("cluster %s in %s", c.Name, c.File)
	}
	// The platform's patch made it the cluster-init chart's release, and the policy admits it.
	if chart, _, _ := unstructured.NestedString(c.Release.Object, "spec", "chart", "spec", "chart"); chart != "./charts/cluster-init" {
		t.Errorf("chart %q", chart)
	}
	if err := p.Admit(c); err != nil {
		t.Errorf("refused: %v", err)
	}
	res, err := p.Render(t.Context(), r, repo, c)
	if err != nil {
		t.Fatal(err)
	}
	var kinds, units []string
	for _, o := range res.Objects {
		obj := o.Object
		if obj.GetKind() == "Kustomization" && o.Unit == "" {
			units = append(units, obj.GetName())
			if obj.GetNamespace() != "workload-clusters" {
				t.Errorf("unit %s in namespace %q", obj.GetName(), obj.GetNamespace())
			}
			if ns, _, _ := unstructured.NestedString(obj.Object, "spec", "sourceRef", "namespace"); ns != "cluster-init" {
				t.Errorf("unit %s reads a source of namespace %q", obj.GetName(), ns)
			}
		}
		switch obj.GetKind() {
		case "Cluster", "KubeadmControlPlane", "MachineDeployment", "DockerCluster", "DockerMachineTemplate", "KubeadmConfigTemplate":
			kinds = append(kinds, obj.GetKind())
			if obj.GetNamespace() != "workload-clusters" || !strings.HasPrefix(obj.GetName(), "wl1") {
				t.Errorf("%s %s/%s: not the tenant's", obj.GetKind(), obj.GetNamespace(), obj.GetName())
			}
		}
		ns := obj.GetNamespace()
		for _, forbidden := range []string{"cert-manager", "capi-system", "capd-system", "capo-system", "orc-system", "flux-system", "capi-kubeadm-bootstrap-system", "capi-kubeadm-control-plane-system"} {
			if ns == forbidden || obj.GetKind() == "Namespace" && obj.GetName() == forbidden {
				t.Errorf("a workload cluster gets %s %s/%s (unit %s)", obj.GetKind(), ns, obj.GetName(), o.Unit)
			}
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			t.Errorf("a workload cluster gets CRD %s (unit %s)", obj.GetName(), o.Unit)
		}
	}
	slices.Sort(units)
	if want := []string{"wl1-cluster", "wl1-cluster-ready", "wl1-cni", "wl1-metrics-server"}; !slices.Equal(units, want) {
		t.Errorf("units %v, want %v", units, want)
	}
	for _, k := range []string{"Cluster", "KubeadmControlPlane", "MachineDeployment", "DockerCluster"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s among %v", k, kinds)
		}
	}
	if res.Settings.Cluster.CAPD.NodeImage == "" {
		t.Error("no CAPD node image")
	}
	for _, o := range res.Objects {
		if o.Object.GetKind() == "DockerMachineTemplate" {
			mounts, _, _ := unstructured.NestedSlice(o.Object.Object, "spec", "template", "spec", "extraMounts")
			if len(mounts) > 0 {
				t.Errorf("a workload cluster's machines mount %v", mounts)
			}
		}
	}
}

// The admission policy, evaluated offline, refuses what would let a tenant act as the platform,
// and says why, naming the file.
func TestThePolicyRefusesMoreThanAClusterDefinition(t *testing.T) {
	p, _, _ := plan(t, "too-much")
	if len(p.Clusters) != 1 {
		t.Fatalf("clusters: %v", p.Clusters)
	}
	err := p.Admit(p.Clusters[0])
	if err == nil {
		t.Fatal("admitted")
	}
	for _, want := range []string{"clusters/management/workload-clusters/too-much/cluster.yaml", "sets none of serviceAccountName", "spec.values holds cluster only"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q: %v", want, err)
		}
	}
}

func TestNoDirectoryNoCluster(t *testing.T) {
	p, _, _ := plan(t)
	if len(p.Clusters) != 0 || len(p.Tenants) != 1 {
		t.Errorf("tenants %v, clusters %v", p.Tenants, p.Clusters)
	}
}

// On a real API server, with what the workload-clusters unit installs: the tenant's account may
// create Clusters and HelmReleases in its namespace and nothing else, and the admission policy
// refuses a HelmRelease that is more than a cluster definition.
func TestATenantCanDefineClustersOnly(t *testing.T) {
	p, r, _ := plan(t, "wl1", "too-much")
	root := testenv.Checkout(t)
	mgmt, err := r.Render(t.Context(), render.Options{Env: testenv.Environment(t, root, "kubeadm-capd"), Context: render.ContextManagement,
		State: []values.Layer{managementstate.State{SelfManaged: true}.Layer()}, Source: gitSource, Units: []string{"workload-clusters"}})
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, o := range mgmt.Objects {
		if o.Unit == "workload-clusters" && o.Object.GetKind() != "HelmRelease" && o.Object.GetKind() != "Kustomization" {
			objs = append(objs, o.Object)
		}
	}
	c := testenv.Start(t, "management")
	if _, err := apply.New(c).Apply(t.Context(), objs); err != nil {
		t.Fatal(err)
	}
	sa := "system:serviceaccount:workload-clusters:tenant"
	for _, q := range []struct {
		verb, group, resource, ns string
		allowed                   bool
	}{
		{"create", "cluster.x-k8s.io", "clusters", "workload-clusters", true},
		{"create", "helm.toolkit.fluxcd.io", "helmreleases", "workload-clusters", true},
		{"get", "", "secrets", "workload-clusters", false},
		{"list", "", "secrets", "workload-clusters", false},
		{"create", "cluster.x-k8s.io", "clusters", "cluster-init", false},
		{"get", "", "secrets", "cluster-init", false},
		{"create", "", "pods", "capd-system", false},
		{"get", "apps", "deployments", "capi-system", false},
		{"create", "kustomize.toolkit.fluxcd.io", "kustomizations", "workload-clusters", false},
		{"create", "rbac.authorization.k8s.io", "rolebindings", "workload-clusters", false},
	} {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:workload-clusters"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: q.verb, Group: q.group, Resource: q.resource, Namespace: q.ns}}}
		if err := c.Client.Create(t.Context(), review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != q.allowed {
			t.Errorf("can the tenant %s %s.%s in %s: %t, want %t", q.verb, q.resource, q.group, q.ns, review.Status.Allowed, q.allowed)
		}
	}

	// The admission policy, on the API server itself, for what the tenant applies (its
	// Kustomization impersonates its account); the platform's own releases are not the tenant's.
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: sa}
	tenant, err := client.New(cfg, client.Options{Scheme: c.Client.Scheme(), Mapper: c.Mapper})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range p.Clusters {
		hr := cl.Release.DeepCopy()
		hr.SetNamespace("workload-clusters")
		var err error
		// The API server takes up a new policy within seconds: until it refuses what it must.
		_ = wait.PollUntilContextTimeout(t.Context(), time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			err = tenant.Create(ctx, hr.DeepCopy())
			if err == nil && cl.Name == "too-much" {
				_ = c.Client.Delete(ctx, hr.DeepCopy())
				return false, nil
			}
			return true, nil
		})
		switch cl.Name {
		case "wl1":
			if err != nil {
				t.Errorf("wl1 refused: %v", err)
			}
		case "too-much":
			if err == nil || !strings.Contains(err.Error(), "sets none of serviceAccountName") {
				t.Errorf("too-much: %v", err)
			}
			// The platform's own releases (a cluster's units) are not held to the tenant's rules.
			hr.SetName("platform-made")
			if err := c.Client.Create(t.Context(), hr); err != nil {
				t.Errorf("a release the platform makes in the tenant's namespace: %v", err)
			}
		}
	}
}
