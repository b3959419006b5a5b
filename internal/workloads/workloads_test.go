package workloads_test

import (
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/source"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/values"
	"cluster-init.dev/cluster-init/internal/workloads"
)

// kustomizationFiles are the ignore rules that leave every kustomization file out of a tenant's artifact.
const kustomizationFiles = "kustomization.yaml\nkustomization.yml\nKustomization"

// gitSource is what bootstrap --source git gives the management cluster.
var gitSource = map[string]any{"type": "git", "url": "http://git.test/cluster-init.git", "ref": map[string]any{"branch": "main"},
	"secret_ref": "cluster-init-git-auth", "environment": "environment-values/kubeadm-capd"}

// management renders the management cluster of kubeadm-capd after the pivot, from git, with
// the platform's values overrides.
func management(t *testing.T, overrides ...values.Layer) (*render.Result, *render.Renderer) {
	t.Helper()
	return managementOf(t, "kubeadm-capd", overrides...)
}

// managementOf renders the management cluster of environment env after the pivot, from git,
// with the platform's values overrides.
func managementOf(t *testing.T, env string, overrides ...values.Layer) (*render.Result, *render.Renderer) {
	t.Helper()
	return managementWithSecrets(t, env, nil, overrides...)
}

// managementWithSecrets is managementOf with the environment's secrets file holding credentials
// too (merged over its own): credentials are never given by --values.
func managementWithSecrets(t *testing.T, env string, credentials map[string]any, overrides ...values.Layer) (*render.Result, *render.Renderer) {
	t.Helper()
	root := testenv.Checkout(t)
	envir := testenv.Environment(t, root, env)
	if credentials != nil {
		dir := t.TempDir()
		if err := source.CopyTree(filepath.Join(root, environment.Dir, env), dir); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "secrets.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var secretValues map[string]any
		if err := sigsyaml.Unmarshal(data, &secretValues); err != nil {
			t.Fatal(err)
		}
		if secretValues == nil {
			secretValues = map[string]any{}
		}
		own, _ := secretValues["credentials"].(map[string]any)
		merged := maps.Clone(own)
		if merged == nil {
			merged = map[string]any{}
		}
		maps.Copy(merged, credentials)
		secretValues["credentials"] = merged
		if data, err = sigsyaml.Marshal(secretValues); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "secrets.yaml"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		envir = testenv.EnvironmentIn(t, root, env, dir)
	}
	r, err := render.New(root, "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	// After the pivot: self_managed, from the pivot's state.
	src := maps.Clone(gitSource)
	src["environment"] = "environment-values/" + env
	mgmt, err := r.Render(t.Context(), render.Options{Env: envir, Context: render.ContextManagement,
		Overrides: overrides, State: []values.Layer{managementstate.State{SelfManaged: true}.Layer()}, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	return mgmt, r
}

// plan renders the management cluster of kubeadm-capd after the pivot, from git, and reads the
// workload clusters of a repository holding the directories of testdata/.
func plan(t *testing.T, dirs ...string) (*workloads.Plan, *render.Renderer, string) {
	t.Helper()
	mgmt, r := management(t)
	repo := t.TempDir()
	for _, d := range dirs {
		rel := filepath.Join("clusters/management/workload-clusters", d)
		if err := source.CopyTree(filepath.Join("testdata", rel), filepath.Join(repo, rel)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := workloads.Read(t.Context(), repo, mgmt, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, r, repo
}

// A workload directory becomes a cluster in the tenant's namespace: its definitions and the units
// that go into it, named after the cluster, reading the platform's source; nothing of the
// management cluster's own components.
func TestAWorkloadDirectoryRendersItsClusterInTheTenantsNamespace(t *testing.T) {
	p, r, _ := plan(t, "wl1")
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
	res, err := p.Render(t.Context(), r, c)
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
	if res.Settings.Cluster.CAPDNodeImage() != "kindest/node:"+res.Settings.Cluster.KubernetesVersion {
		t.Errorf("the CAPD node image %s, want the one of the cluster's version", res.Settings.Cluster.CAPDNodeImage())
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

// A tenant whose clusters are simulated in memory (CAPD's in-memory backend, for scale tests) gets
// a DevCluster and DevMachineTemplates that touch nothing of the host, no unit that goes into the
// cluster (it has no pods), and its gate waits for the Cluster itself; its builder may write the
// Dev kinds only, and the policy admits its cluster.
func TestAnInMemoryTenantsClustersAreSimulated(t *testing.T) {
	mgmt, r := management(t, values.FromMap("(test)", map[string]any{"workload_clusters": map[string]any{"tenants": map[string]any{
		"workload-clusters": map[string]any{"infrastructure": "in-memory"}}}}))
	// wl1 as its tenant writes it, without providers: the platform's are the tenant's.
	repo := writeRepository(t, map[string]string{"clusters/management/workload-clusters/wl1/cluster.yaml": wl1WithoutProviders(t, "wl1")})
	p, err := workloads.Read(t.Context(), repo, mgmt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Clusters) != 1 {
		t.Fatalf("clusters: %v", p.Clusters)
	}
	if err := p.Admit(p.Clusters[0]); err != nil {
		t.Errorf("refused: %v", err)
	}
	res, err := p.Render(t.Context(), r, p.Clusters[0])
	if err != nil {
		t.Fatal(err)
	}
	var units, kinds []string
	for _, o := range res.Objects {
		obj := o.Object
		if obj.GetKind() == "Kustomization" && o.Unit == "" {
			units = append(units, obj.GetName())
		}
		kinds = append(kinds, obj.GetKind())
		switch obj.GetKind() {
		case "DevCluster":
			if _, ok, _ := unstructured.NestedMap(obj.Object, "spec", "backend", "inMemory"); !ok || obj.GetName() != "wl1" {
				t.Errorf("DevCluster %s: %v", obj.GetName(), obj.Object["spec"])
			}
		case "DevMachineTemplate":
			backend, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec", "backend")
			if _, ok := backend["inMemory"]; !ok || len(backend) != 1 {
				t.Errorf("DevMachineTemplate %s: backend %v", obj.GetName(), backend)
			}
		case "DockerCluster", "DockerMachineTemplate":
			t.Errorf("an in-memory cluster gets %s %s", obj.GetKind(), obj.GetName())
		case "Kustomization":
			if obj.GetName() == "wl1-cluster-ready" {
				deps, _, _ := unstructured.NestedSlice(obj.Object, "spec", "dependsOn")
				if len(deps) != 1 || deps[0].(map[string]any)["name"] != "wl1-cluster" {
					t.Errorf("the gate depends on %v, want wl1-cluster", deps)
				}
			}
		}
	}
	slices.Sort(units)
	if want := []string{"wl1-cluster", "wl1-cluster-ready"}; !slices.Equal(units, want) {
		t.Errorf("units %v, want %v", units, want)
	}
	for _, k := range []string{"Cluster", "KubeadmControlPlane", "MachineDeployment", "DevCluster", "DevMachineTemplate"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s among %v", k, kinds)
		}
	}
	// The tenant's builder writes its infrastructure's kinds, none of Docker's.
	for _, o := range mgmt.Objects {
		if o.Object.GetKind() != "Role" || o.Object.GetName() != "cluster-builder" || o.Object.GetNamespace() != "workload-clusters" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object.Object, "rules")
		for _, rule := range rules {
			m := rule.(map[string]any)
			if groups := fmt.Sprint(m["apiGroups"]); groups == "[infrastructure.cluster.x-k8s.io]" {
				if got := fmt.Sprint(m["resources"]); got != "[devclusters devmachinetemplates]" {
					t.Errorf("the builder writes %s", got)
				}
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
	for _, want := range []string{"clusters/management/workload-clusters/too-much/cluster.yaml", "cluster.yaml:13: units: a workload cluster sets spec.values.cluster only", "cluster.yaml:11: cluster.capd: not a value of a workload cluster"} {
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

// A tenant's kustomization.yaml reaches nothing outside its directory: its source holds that
// directory alone, and so does the build here.
func TestATenantsKustomizationStaysInItsDirectory(t *testing.T) {
	mgmt, _ := management(t)
	repo := t.TempDir()
	for _, d := range []string{"clusters/management/workload-clusters/escape", "clusters/management/team-b/b-one"} {
		src := filepath.Join("testdata", d)
		if strings.Contains(d, "team-b") {
			src = filepath.Join("testdata", "clusters/management/workload-clusters/wl1")
		}
		if err := source.CopyTree(src, filepath.Join(repo, d)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := workloads.Read(t.Context(), repo, mgmt, nil)
	t.Logf("refused: %v", err)
	if err == nil || !strings.Contains(err.Error(), "clusters/management/workload-clusters/escape/kustomization.yaml: never read: a tenant's directory is plain manifests") || strings.Contains(err.Error(), "not found in a file") {
		t.Fatalf("a kustomization reaching ../../team-b: %v", err)
	}
	// What the cluster builds of the directory: nothing of team-b's.
	for _, c := range p.Clusters {
		if c.Tenant.Namespace == "workload-clusters" {
			t.Errorf("the default tenant's directory built %s (%s)", c.Name, c.File)
		}
	}
	// The tenant's source ignores everything but its directory, and every kustomization file.
	for _, o := range mgmt.Objects {
		if o.Object.GetKind() == "GitRepository" && o.Object.GetName() == "tenant-workload-clusters" {
			ignore, _, _ := unstructured.NestedString(o.Object.Object, "spec", "ignore")
			if want := "/*\n!/clusters/\n/clusters/*\n!/clusters/management/\n/clusters/management/*\n!/clusters/management/workload-clusters/\n" + kustomizationFiles; ignore != want {
				t.Errorf("ignore %q, want %q", ignore, want)
			}
			return
		}
	}
	t.Error("no source of the tenant's directory")
}

// While a restore holds the tenants (its state layer, as the cluster renders it), every tenant's
// directory is suspended; released, none is.
func TestARestoreHoldsEveryTenantsDirectory(t *testing.T) {
	env := tenantsEnvironment(t, testenv.Checkout(t), `
workload_clusters:
  tenants:
    workload-clusters: {name_prefix: wl-}
    team-a: {name_prefix: a-, path: ./clusters/management/team-a}
`, "")
	r, err := render.New(testenv.Checkout(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, held := range []bool{true, false} {
		res, err := r.Render(t.Context(), render.Options{Env: env, Context: render.ContextManagement, Source: gitSource, Units: []string{"workload-clusters"},
			State: []values.Layer{managementstate.State{SelfManaged: true, HoldTenants: held}.Layer()}})
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range []string{"workload-clusters", "team-a"} {
			ks := object(res, "Kustomization", ns, "workload-clusters")
			if ks == nil {
				t.Fatalf("no directory Kustomization in %s", ns)
			}
			if suspended, _, _ := unstructured.NestedBool(ks.Object, "spec", "suspend"); suspended != held {
				t.Errorf("tenants held: %t; %s's directory suspended: %t", held, ns, suspended)
			}
		}
	}
}

// The chart refuses tenants that could step on one another or on the platform: overlapping name
// prefixes, namespaces whose charts could be named alike, and shared or nested directories.
func TestTenantsThatCouldCollideAreRefused(t *testing.T) {
	root := testenv.Checkout(t)
	r, err := render.New(root, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, c := range []struct {
		tenants map[string]any
		refused string
	}{
		{map[string]any{"team-a": map[string]any{"path": "./clusters/a"}}, "overlap"},
		{map[string]any{"team-a": map[string]any{"path": "./clusters/a", "name_prefix": "a-"}, "team-b": map[string]any{"path": "./clusters/b", "name_prefix": "b-"}}, ""},
		{map[string]any{"team-a": map[string]any{"path": "./clusters/a"}, "team-b": map[string]any{"path": "./clusters/b"}}, "overlap"},
		{map[string]any{"team-a": map[string]any{"path": "./clusters/a", "name_prefix": "a-"}, "team-b": map[string]any{"path": "./clusters/b", "name_prefix": "a-b-"}}, "overlap"},
		{map[string]any{"team": map[string]any{"path": "./clusters/a", "name_prefix": "a-"}, "team-b": map[string]any{"path": "./clusters/b", "name_prefix": "b-"}}, "starts the other's"},
		{map[string]any{"cluster": map[string]any{"path": "./clusters/a"}}, "may not start one another"},
		{map[string]any{"cluster-init-x": map[string]any{"path": "./clusters/a"}}, "may not start one another"},
		{map[string]any{"team-a": map[string]any{"name_prefix": "a-"}, "team-b": map[string]any{"name_prefix": "b-"}}, "a directory of its own"},
		{map[string]any{"team-a": map[string]any{"path": "./clusters/a", "name_prefix": "a-"}, "team-b": map[string]any{"path": "./clusters/a/b", "name_prefix": "b-"}}, "a directory of its own"},
	} {
		// The default tenant is there too, with a prefix and directory of its own.
		c.tenants["workload-clusters"] = map[string]any{"name_prefix": "wl-"}
		_, err := r.Render(t.Context(), render.Options{Env: testenv.Environment(t, root, "kubeadm-capd"), Context: render.ContextManagement,
			Overrides: []values.Layer{values.FromMap("(test)", map[string]any{"workload_clusters": map[string]any{"tenants": c.tenants}})},
			State:     []values.Layer{managementstate.State{SelfManaged: true}.Layer()}, Source: gitSource, Units: []string{"workload-clusters"}})
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%v refused: %v", c.tenants, err)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%v: %v, want a refusal naming %q", c.tenants, err, c.refused)
		}
	}
}

// tenantsEnvironment is kubeadm-capd with the tenants and secrets given, in a directory of its own.
func tenantsEnvironment(t *testing.T, root, tenants, secrets string) *environment.Environment {
	t.Helper()
	dir := t.TempDir()
	if err := source.CopyTree(filepath.Join(root, environment.Dir, "kubeadm-capd"), dir); err != nil {
		t.Fatal(err)
	}
	vals, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), append(vals, []byte(tenants)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets.yaml"), []byte(secrets), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := environment.Load("tenants", dir, func(p string) string { return p }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func renderTenants(t *testing.T, env *environment.Environment) (*render.Result, error) {
	t.Helper()
	r, err := render.New(testenv.Checkout(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return r.Render(t.Context(), render.Options{Env: env, Context: render.ContextManagement,
		State: []values.Layer{managementstate.State{SelfManaged: true}.Layer()}, Source: gitSource, Units: []string{"workload-clusters"}})
}

func object(res *render.Result, kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range res.Objects {
		if o.Object.GetKind() == kind && o.Object.GetNamespace() == namespace && o.Object.GetName() == name {
			return o.Object
		}
	}
	return nil
}

// A tenant with a repository of its own reads it alone, with credentials only source-controller
// reads; a tenant of the platform's repository reads its directory of it; a readers group reads
// its tenant's clusters.
func TestATenantsOwnRepository(t *testing.T) {
	const password = "s3cr3t-pass-of-team-a"
	env := tenantsEnvironment(t, testenv.Checkout(t), `
workload_clusters:
  tenants:
    workload-clusters: {name_prefix: wl-}
    team-a:
      name_prefix: a-
      repository: {url: "https://git.example/team-a/clusters.git"}
      readers_group: "oidc:team-a"
    team-c:
      name_prefix: c-
      path: ./clusters
      repository: {url: "https://git.example/team-c/infra.git", ref: {tag: v1}, interval: 5m}
`, "credentials:\n  tenants:\n    team-a:\n      git: {username: team-a-bot, password: "+password+"}\n")
	res, err := renderTenants(t, env)
	if err != nil {
		t.Fatal(err)
	}
	spec := func(name string) map[string]any {
		o := object(res, "GitRepository", names.Namespace, name)
		if o == nil {
			t.Fatalf("no GitRepository %s", name)
		}
		s, _, _ := unstructured.NestedMap(o.Object, "spec")
		return s
	}
	a := spec("tenant-team-a")
	if a["url"] != "https://git.example/team-a/clusters.git" || !reflect.DeepEqual(a["ref"], map[string]any{"branch": "main"}) ||
		!reflect.DeepEqual(a["secretRef"], map[string]any{"name": "tenant-team-a-git"}) || a["ignore"] != kustomizationFiles {
		t.Errorf("team-a's source: %v, want its repository, branch main, its Secret and all of it", a)
	}
	c := spec("tenant-team-c")
	if c["url"] != "https://git.example/team-c/infra.git" || !reflect.DeepEqual(c["ref"], map[string]any{"tag": "v1"}) ||
		c["secretRef"] != nil || c["interval"] != "5m" || c["ignore"] != "/*\n!/clusters/\n"+kustomizationFiles {
		t.Errorf("team-c's source: %v, want its repository at tag v1, no credentials, its directory alone", c)
	}
	wl := spec("tenant-workload-clusters")
	if wl["url"] != gitSource["url"] || !reflect.DeepEqual(wl["secretRef"], map[string]any{"name": "cluster-init-git-auth"}) ||
		!strings.Contains(wl["ignore"].(string), "!/clusters/management/workload-clusters/") {
		t.Errorf("the default tenant's source: %v, want the platform's repository, its credentials, the tenant's directory alone", wl)
	}
	if p, _, _ := unstructured.NestedString(object(res, "Kustomization", "team-a", names.TenantKustomization).Object, "spec", "path"); p != "./" {
		t.Errorf("team-a's Kustomization applies %q, want all of its repository (./)", p)
	}

	sec := object(res, "Secret", names.Namespace, "tenant-team-a-git")
	if sec == nil {
		t.Fatal("no Secret of team-a's credentials in the platform's namespace")
	}
	data, _, _ := unstructured.NestedStringMap(sec.Object, "data")
	if data["username"] != base64.StdEncoding.EncodeToString([]byte("team-a-bot")) || data["password"] != base64.StdEncoding.EncodeToString([]byte(password)) {
		t.Errorf("team-a's credentials: %v", data)
	}
	for _, o := range res.Objects {
		// The environment's Secret, the credentials the release checked, team-a's: no other.
		if o.Object.GetKind() == "Secret" && o.Object.GetName() != "tenant-team-a-git" && o.Object.GetName() != names.SecretsSecret && o.Object.GetName() != names.CredentialsSecret {
			t.Errorf("a Secret other than team-a's credentials: %s/%s", o.Object.GetNamespace(), o.Object.GetName())
		}
		if o.Object.GetKind() != "Secret" && strings.Contains(fmt.Sprint(o.Object.Object), password) {
			t.Errorf("%s %s/%s holds team-a's password", o.Object.GetKind(), o.Object.GetNamespace(), o.Object.GetName())
		}
	}

	rb := object(res, "RoleBinding", "team-a", "tenant-readers")
	if rb == nil {
		t.Fatal("no RoleBinding of team-a's readers")
	}
	subjects, _, _ := unstructured.NestedSlice(rb.Object, "subjects")
	if !reflect.DeepEqual(subjects, []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "oidc:team-a"}}) {
		t.Errorf("team-a's readers: %v", subjects)
	}
	if object(res, "RoleBinding", "team-c", "tenant-readers") != nil {
		t.Error("team-c has readers it did not ask for")
	}
}

// Credentials for a repository the tenant does not have, an URL with a password in it, tenants
// of one repository sharing a directory: refused before anything is created.
func TestATenantsRepositoryIsChecked(t *testing.T) {
	root := testenv.Checkout(t)
	for _, c := range []struct{ name, tenants, secrets, refused string }{
		{"credentials without a repository", "workload_clusters:\n  tenants:\n    team-a: {name_prefix: a-}\n",
			"credentials:\n  tenants:\n    team-a:\n      git: {username: u, password: p}\n", "credentials.tenants.team-a"},
		{"a password in the URL", "workload_clusters:\n  tenants:\n    team-a: {name_prefix: a-, repository: {url: \"https://u:p@git.example/a.git\"}}\n",
			"credentials: {}\n", "repository"},
		{"a document in the branch", "workload_clusters:\n  tenants:\n    team-a: {name_prefix: a-, repository: {url: \"https://git.example/a.git\", ref: {branch: \"main\\n---\"}}}\n",
			"credentials: {}\n", "branch"},
		{"one repository, one directory", "workload_clusters:\n  tenants:\n    team-a: {name_prefix: a-, repository: {url: \"https://git.example/x.git\"}}\n    team-b: {name_prefix: b-, path: ./b, repository: {url: \"https://git.example/x.git\"}}\n",
			"credentials: {}\n", "a directory of its own"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := renderTenants(t, tenantsEnvironment(t, root, c.tenants, c.secrets))
			if err == nil || !strings.Contains(err.Error(), c.refused) {
				t.Fatalf("%v, want a refusal naming %q", err, c.refused)
			}
			if strings.Contains(err.Error(), "password: p") {
				t.Errorf("the refusal prints a credential: %v", err)
			}
		})
	}
	// Two tenants, each with all of its own repository: no shared directory.
	if _, err := renderTenants(t, tenantsEnvironment(t, root, "workload_clusters:\n  tenants:\n    workload-clusters: {name_prefix: wl-}\n    team-a: {name_prefix: a-, repository: {url: \"https://git.example/a.git\"}}\n    team-b: {name_prefix: b-, repository: {url: \"https://git.example/b.git\"}}\n", "credentials: {}\n")); err != nil {
		t.Errorf("two tenants with repositories of their own: %v", err)
	}
}

// wl1WithoutProviders is testdata's wl1 named name, without its providers: as a tenant writes
// it, the platform's providers being the tenant's.
func wl1WithoutProviders(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "clusters/management/workload-clusters/wl1/cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := strings.Replace(string(data), "      providers:\n        bootstrap: kubeadm\n        infrastructure: capd\n", "", 1)
	if file == string(data) {
		t.Fatal("wl1 names no providers to leave out")
	}
	return strings.ReplaceAll(file, "wl1", name)
}

// writeRepository is a repository holding files (path: content).
func writeRepository(t *testing.T, files map[string]string) string {
	t.Helper()
	repo := t.TempDir()
	for rel, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, rel), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return repo
}
