package validate_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/source"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/validate"
	"cluster-init.dev/cluster-init/internal/values"
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
	for _, want := range []string{"kubeadm-capd", "rke2-capd", "kubeadm-capo", "rke2-capo"} {
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
			reports, err := validate.Environment(t.Context(), r, root, render.Options{Env: env})
			if err != nil {
				t.Fatal(err)
			}
			if len(reports) != len(validate.Targets()) {
				t.Fatalf("validated %d targets, want %d", len(reports), len(validate.Targets()))
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

// With a git source, validate checks every workload cluster committed to the checkout: a valid one
// is a target of its own, a wrong value is reported with the file and line of the tenant's values.
func TestWorkloadClustersOfTheCheckoutAreValidated(t *testing.T) {
	root := testenv.Checkout(t)
	r, err := render.New(root, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	repo := t.TempDir()
	for _, d := range []string{"wl1", "bad-values"} {
		rel := filepath.Join("clusters/management/workload-clusters", d)
		if err := source.CopyTree(filepath.Join(root, "internal/workloads/testdata", rel), filepath.Join(repo, rel)); err != nil {
			t.Fatal(err)
		}
	}
	git := map[string]any{"type": "git", "url": "http://git.test/r.git", "ref": map[string]any{"branch": "main"}, "environment": "environment-values/kubeadm-capd"}
	reports, err := validate.Environment(t.Context(), r, repo, render.Options{Env: testenv.Environment(t, root, "kubeadm-capd"), Source: git})
	if err == nil || !strings.Contains(err.Error(), "clusters/management/workload-clusters/bad-values/cluster.yaml:10: cluster.workers.replicas") {
		t.Fatalf("bad workload values: %v", err)
	}
	if strings.Count(err.Error(), "\n") > 0 {
		t.Errorf("more than the one problem:\n%v", err)
	}
	var targets []string
	for _, rep := range reports {
		targets = append(targets, rep.Target)
	}
	if !slices.Contains(targets, "workload cluster workload-clusters/wl1") {
		t.Errorf("targets %v", targets)
	}
}

// The applications committed for the management cluster are checked as far as the checkout can
// tell: a cluster name that is none of its clusters, and manifests that do not build, each named
// with its application; a good application passes.
func TestApplicationsOfTheCheckoutAreValidated(t *testing.T) {
	root := testenv.Checkout(t)
	r, err := render.New(root, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	repo := t.TempDir()
	rel := "clusters/management/workload-clusters/wl1"
	if err := source.CopyTree(filepath.Join(root, "internal/workloads/testdata", rel), filepath.Join(repo, rel)); err != nil {
		t.Fatal(err)
	}
	write := func(rel, content string) {
		t.Helper()
		path := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	app := func(name, clusters string) {
		dir := "clusters/management/apps/" + name + "/"
		write(dir+"kustomization.yaml", "resources: [application.yaml]\n")
		write(dir+"application.yaml", "apiVersion: apps.cluster-init.dev/v1alpha1\nkind: Application\nmetadata:\n  name: "+name+
			"\nspec:\n  sourceRef: {kind: GitRepository, name: cluster-init}\n  path: ./"+dir+"manifests\n  placement:\n    clusters: "+clusters+"\n")
	}
	app("good", "[management, workload-clusters/wl1]")
	write("clusters/management/apps/good/manifests/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello-${CLUSTER_NAME}\n  namespace: default\n")
	app("typo", "[wl2]")
	write("clusters/management/apps/typo/manifests/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\n  namespace: default\n")
	// A tenant's cluster by its name alone: a name alone is the platform's namespace's.
	app("bare", "[wl1]")
	write("clusters/management/apps/bare/manifests/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\n  namespace: default\n")
	app("broken", "[management]")
	write("clusters/management/apps/nochart/kustomization.yaml", "resources: [application.yaml]\n")
	write("clusters/management/apps/nochart/application.yaml", "apiVersion: apps.cluster-init.dev/v1alpha1\nkind: Application\nmetadata:\n  name: nochart\n"+
		"spec:\n  sourceRef: {kind: GitRepository, name: cluster-init}\n  chart: {path: ./charts/nothing-here}\n  placement:\n    clusters: [management]\n")
	write("clusters/management/apps/broken/manifests/kustomization.yaml", "resources: [missing.yaml]\n")
	// Refused by the Application CRD's rules, as the API server would: a path out of the source.
	write("clusters/management/apps/climbs/kustomization.yaml", "resources: [application.yaml]\n")
	write("clusters/management/apps/climbs/application.yaml", "apiVersion: apps.cluster-init.dev/v1alpha1\nkind: Application\nmetadata:\n  name: climbs\n"+
		"spec:\n  sourceRef: {kind: GitRepository, name: cluster-init}\n  path: ./clusters/../../etc\n  placement:\n    clusters: [management]\n")

	git := map[string]any{"type": "git", "url": "http://git.test/r.git", "ref": map[string]any{"branch": "main"}, "environment": "environment-values/kubeadm-capd"}
	_, err = validate.Environment(t.Context(), r, repo, render.Options{Env: testenv.Environment(t, root, "kubeadm-capd"), Source: git})
	if err == nil {
		t.Fatal("the bad applications were accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		`application typo: placement.clusters: "wl2" is not a cluster of this management cluster: expected one of cluster-init/management, workload-clusters/wl1`,
		"application broken: spec.path ./clusters/management/apps/broken/manifests does not build",
		"application nochart: spec.chart.path: ./charts/nothing-here is not a Helm chart of the checkout (no Chart.yaml)",
		`application bare: placement.clusters: "wl1" is not a cluster of this management cluster`,
		"application climbs: spec.path: Invalid value: \"./clusters/../../etc\": a path of the source: no '..'",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the problems lack %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "application good") || strings.Count(msg, "\n") != 4 {
		t.Errorf("want exactly the five problems:\n%s", msg)
	}

	// Where the values keep applications off the management cluster, placing one there is a problem.
	_, err = validate.Environment(t.Context(), r, repo, render.Options{Env: testenv.Environment(t, root, "kubeadm-capd"), Source: git,
		Overrides: []values.Layer{values.FromMap("(test)", map[string]any{"applications": map[string]any{"on_management": false}})}})
	if err == nil || !strings.Contains(err.Error(), `placement.clusters: "management": applications do not run on the management cluster here`) {
		t.Errorf("an application on the management cluster, where the values keep them off: %v", err)
	}
}

// A tenant with a repository of its own: its clusters are not in the platform's checkout, and
// validate says so; given a checkout of its repository (--tenant NS=DIR), they are validated
// against the platform's rules, each problem naming the tenant's file and line.
func TestATenantsOwnRepositoryIsValidatedFromItsCheckout(t *testing.T) {
	root := testenv.Checkout(t)
	r, err := render.New(root, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	platform, tenant := t.TempDir(), t.TempDir()
	for _, c := range []struct{ from, to string }{
		{"clusters/management/workload-clusters/wl1", filepath.Join(platform, "clusters/management/workload-clusters/wl1")},
		{"clusters/management/workload-clusters/bad-values", filepath.Join(tenant, "bad-values")},
	} {
		if err := source.CopyTree(filepath.Join(root, "internal/workloads/testdata", c.from), c.to); err != nil {
			t.Fatal(err)
		}
	}
	git := map[string]any{"type": "git", "url": "http://git.test/r.git", "ref": map[string]any{"branch": "main"}, "environment": "environment-values/kubeadm-capd"}
	opts := render.Options{Env: testenv.Environment(t, root, "kubeadm-capd"), Source: git,
		Overrides: []values.Layer{values.FromMap("(test)", map[string]any{"workload_clusters": map[string]any{"tenants": map[string]any{
			"workload-clusters": map[string]any{"name_prefix": "wl"},
			"team-c":            map[string]any{"name_prefix": "bad-", "repository": map[string]any{"url": "https://git.example/team-c.git"}},
		}}})}}

	reports, err := validate.EnvironmentAs(t.Context(), r, platform, opts, validate.Targets(), nil)
	if err != nil {
		t.Fatalf("without team-c's checkout: %v", err)
	}
	unread := ""
	for _, rep := range reports {
		if rep.Target == "tenant team-c" {
			unread = rep.Unread
		}
	}
	if !strings.Contains(unread, "https://git.example/team-c.git") || !strings.Contains(unread, "--tenant team-c=DIR") {
		t.Errorf("team-c's clusters, not at hand: %q", unread)
	}

	_, err = validate.EnvironmentAs(t.Context(), r, platform, opts, validate.Targets(), map[string]string{"team-c": tenant})
	if err == nil || !strings.Contains(err.Error(), "bad-values/cluster.yaml:10: cluster.workers.replicas") {
		t.Fatalf("team-c's bad values: %v", err)
	}
	_, err = validate.EnvironmentAs(t.Context(), r, platform, opts, validate.Targets(), map[string]string{"workload-clusters": tenant})
	if err == nil || !strings.Contains(err.Error(), "workload_clusters.tenants.workload-clusters has no repository of its own") {
		t.Fatalf("a checkout for a tenant of the platform's repository: %v", err)
	}
}
