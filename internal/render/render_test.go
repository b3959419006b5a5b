package render_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/values"
)

// expectedEdges is the documented order (charts/cluster-init/README.md) of the units of a management cluster
// environment with the given providers, in a context; selfManaged is the state after the pivot.
func expectedEdges(bootstrap, infra, context string, selfManaged bool) []string {
	bootstrapUnit := map[string]string{"kubeadm": "cabpk", "rke2": "cabpr"}[bootstrap]
	edges := []string{}
	if context != render.ContextWorkload {
		edges = append(edges,
			"capi -> cert-manager",
			bootstrapUnit+" -> capi",
			infra+" -> capi")
		if infra == "capo" {
			edges = append(edges, "capo -> orc")
		}
	}
	definitions := context != render.ContextManagement || selfManaged
	if definitions {
		if context != render.ContextWorkload {
			edges = append(edges, "cluster -> "+bootstrapUnit, "cluster -> "+infra, "cluster -> capi")
		}
		edges = append(edges, "cni -> cluster", "cluster-ready -> cni")
		if context == render.ContextWorkload {
			// What goes into every workload cluster besides its CNI.
			edges = append(edges, "metrics-server -> cni")
		}
	}
	if context == render.ContextBootstrap {
		edges = append(edges,
			// The management cluster is prepared while its workers join; the pivot waits for both.
			"management-flux -> cni",
			"management-configs -> cluster",
			"management-cluster-init -> management-configs",
			"management-cluster-init -> management-flux",
			"pivot -> cluster-ready",
			"pivot -> management-cluster-init")
	}
	sort.Strings(edges)
	return edges
}

func TestDependsOnFollowTheDocumentedOrder(t *testing.T) {
	root := testenv.Checkout(t)
	envs := []struct{ name, bootstrap, infra string }{
		{"kubeadm-capd", "kubeadm", "capd"},
		{"rke2-capd", "rke2", "capd"},
		{"kubeadm-capo", "kubeadm", "capo"},
		{"rke2-capo", "rke2", "capo"},
	}
	for _, e := range envs {
		env := testenv.Environment(t, root, e.name)
		for _, c := range []struct {
			context     string
			selfManaged bool
		}{{render.ContextBootstrap, false}, {render.ContextManagement, false}, {render.ContextManagement, true}} {
			t.Run(fmt.Sprintf("%s/%s/self_managed=%t", e.name, c.context, c.selfManaged), func(t *testing.T) {
				var overrides []values.Layer
				if c.selfManaged {
					overrides = append(overrides, selfManaged())
				}
				res := renderEnv(t, root, env, c.context, overrides...)
				_, edges := kustomizationEdges(res)
				want := expectedEdges(e.bootstrap, e.infra, c.context, c.selfManaged)
				if !slices.Equal(edges, want) {
					t.Errorf("dependsOn edges:\n got  %v\n want %v", edges, want)
				}
				// The graph the CLI reads is the graph Flux runs.
				if got := res.Graph.Edges(); !slices.Equal(got, edges) {
					t.Errorf("unit graph ConfigMap edges %v differ from the Kustomizations' %v", got, edges)
				}
				// Every unit comes after its dependencies in the graph's order.
				seen := map[string]bool{}
				for _, u := range res.Graph.Enabled() {
					for _, d := range u.DependsOn {
						if !seen[d] {
							t.Errorf("order %v: %s before its dependency %s", res.Graph.Order, u.Name, d)
						}
					}
					seen[u.Name] = true
				}
			})
		}
	}

	t.Run("kubeadm-capd/workload", func(t *testing.T) {
		// A workload cluster's release names its objects after itself (the release cluster-init here).
		res := renderEnv(t, root, testenv.Environment(t, root, "kubeadm-capd"), render.ContextWorkload)
		_, edges := kustomizationEdges(res)
		for i := range edges {
			edges[i] = strings.ReplaceAll(edges[i], "cluster-init-", "")
		}
		if want := expectedEdges("kubeadm", "capd", render.ContextWorkload, false); !slices.Equal(edges, want) {
			t.Errorf("dependsOn edges:\n got  %v\n want %v", edges, want)
		}
	})
}

// The providers start once Cluster API's objects (its CRDs, the clusterctl inventory's) are applied,
// as clusterctl init installs them together; everything else waits for its dependencies to be
// ready. Flux checks it (readyExpr), and the graph the CLI reads says it.
func TestProvidersStartOnceClusterAPIIsApplied(t *testing.T) {
	root := testenv.Checkout(t)
	for _, e := range []struct {
		env       string
		providers []string
	}{{"kubeadm-capd", []string{"cabpk", "capd"}}, {"rke2-capo", []string{"cabpr", "capo"}}} {
		for _, context := range []string{render.ContextBootstrap, render.ContextManagement} {
			t.Run(e.env+"/"+context, func(t *testing.T) {
				res := renderEnv(t, root, testenv.Environment(t, root, e.env), context)
				onApply := map[string]string{}
				for _, o := range res.Objects {
					if o.Unit != "" || o.Object.GetKind() != "Kustomization" {
						continue
					}
					deps, _, _ := unstructured.NestedSlice(o.Object.Object, "spec", "dependsOn")
					for _, d := range deps {
						ref := d.(map[string]any)
						if expr, ok := ref["readyExpr"].(string); ok {
							onApply[o.Object.GetName()+" -> "+ref["name"].(string)] = expr
						}
					}
				}
				want := map[string]string{}
				for _, p := range e.providers {
					want[p+" -> capi"] = "has(dep.status.inventory)"
				}
				if context == render.ContextBootstrap {
					// Its release needs Flux's CRDs in the management cluster, not Flux running.
					want["management-cluster-init -> management-flux"] = "has(dep.status.inventory)"
				}
				if !maps.Equal(onApply, want) {
					t.Errorf("dependencies checked by readyExpr: got %v, want %v", onApply, want)
				}
				for _, p := range e.providers {
					if got := res.Graph.Units[p].AppliedDeps; !slices.Equal(got, []string{"capi"}) {
						t.Errorf("graph: %s applied dependencies %v, want [capi]", p, got)
					}
				}
			})
		}
	}
}

func TestDisablingAProviderRemovesItsUnitAndEveryEdgeToIt(t *testing.T) {
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capd")
	// Disabled alone, it is refused: the cluster needs it.
	disabled := values.FromMap("(test)", map[string]any{"units": map[string]any{"capd": map[string]any{"enabled": false}}})
	r, err := render.New(root, "v1.37.0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Render(t.Context(), render.Options{Env: env, Context: render.ContextBootstrap, Overrides: []values.Layer{disabled}}); err == nil || !strings.Contains(err.Error(), "units.capd.enabled: disabled, but cluster depends on it") {
		t.Errorf("disabling a unit the cluster needs: %v", err)
	}
	// Provided another way: the dependency is given up explicitly.
	res := renderEnv(t, root, env, render.ContextBootstrap,
		values.FromMap("(test)", map[string]any{"units": map[string]any{"capd": map[string]any{"enabled": false},
			"cluster": map[string]any{"depends_on": map[string]any{"capd": false}}}}))

	units, edges := kustomizationEdges(res)
	if slices.Contains(units, "capd") {
		t.Errorf("capd is still rendered: %v", units)
	}
	for _, e := range edges {
		if strings.Contains(e, "capd") {
			t.Errorf("edge to the disabled unit: %s", e)
		}
	}
	for _, o := range res.Objects {
		// The cluster is still a CAPD cluster (CAPD installed some other way), so the pivot keeps
		// its read access to the provider's namespace; nothing else may reach it.
		pivotAccess := o.Unit == "pivot" && strings.HasPrefix(o.Object.GetKind(), "Role")
		if o.Unit == "capd" || (o.Object.GetNamespace() == "capd-system" && !pivotAccess) || (o.Object.GetKind() == "Namespace" && o.Object.GetName() == "capd-system") {
			t.Errorf("object of the disabled provider rendered: %s %s/%s (unit %s)", o.Object.GetKind(), o.Object.GetNamespace(), o.Object.GetName(), o.Unit)
		}
	}
	capd := res.Graph.Units["capd"]
	if capd.Enabled || capd.Reason != "enabled: false" {
		t.Errorf("capd state: enabled %t, reason %q", capd.Enabled, capd.Reason)
	}
	if cluster := res.Graph.Units["cluster"]; slices.Contains(cluster.DependsOn, "capd") {
		t.Errorf("cluster still depends on capd: %v", cluster.DependsOn)
	}

	// Switching provider does the same through the units' enabled templates.
	res = renderEnv(t, root, env, render.ContextBootstrap,
		values.FromMap("(test)", map[string]any{"cluster": map[string]any{"providers": map[string]any{"bootstrap": "rke2"}}}))
	units, edges = kustomizationEdges(res)
	if slices.Contains(units, "cabpk") || !slices.Contains(units, "cabpr") {
		t.Errorf("bootstrap provider rke2: units %v", units)
	}
	if slices.ContainsFunc(edges, func(e string) bool { return strings.Contains(e, "cabpk") }) {
		t.Errorf("edges still name cabpk: %v", edges)
	}

	// With the other infrastructure provider nothing at all reaches capd's namespace.
	res = renderEnv(t, root, testenv.Environment(t, root, "kubeadm-capo"), render.ContextBootstrap)
	units, edges = kustomizationEdges(res)
	if slices.Contains(units, "capd") || !slices.Contains(units, "capo") {
		t.Errorf("infrastructure provider capo: units %v", units)
	}
	if slices.ContainsFunc(edges, func(e string) bool { return strings.Contains(e, "capd") }) {
		t.Errorf("edges still name capd: %v", edges)
	}
	for _, o := range res.Objects {
		if o.Unit == "capd" || o.Object.GetNamespace() == "capd-system" {
			t.Errorf("infrastructure provider capo renders %s %s/%s (unit %s)", o.Object.GetKind(), o.Object.GetNamespace(), o.Object.GetName(), o.Unit)
		}
	}
}

func TestWorkloadContextRendersNoManagementComponent(t *testing.T) {
	root := testenv.Checkout(t)
	managementOnly := []string{"cert-manager", "capi", "cabpk", "cabpr", "capd", "capo", "orc",
		"management-flux", "management-configs", "management-cluster-init", "pivot", "cluster-init"}
	for _, name := range []string{"kubeadm-capd", "kubeadm-capo"} {
		env := testenv.Environment(t, root, name)
		res := renderEnv(t, root, env, render.ContextWorkload)
		units := res.Graph.Order
		for _, u := range managementOnly {
			if slices.Contains(units, u) {
				t.Errorf("%s: workload context renders management unit %s", name, u)
			}
		}
		if !slices.Contains(units, "cluster") || !slices.Contains(units, "cni") || !slices.Contains(units, "metrics-server") {
			t.Errorf("%s: workload context lacks the cluster definitions, the CNI or metrics-server: %v", name, units)
		}
		for _, o := range res.Objects {
			ns := o.Object.GetNamespace()
			if slices.Contains(managementNamespaces, ns) || o.Object.GetKind() == "CustomResourceDefinition" {
				t.Errorf("%s: workload context renders %s %s/%s (unit %s)", name, o.Object.GetKind(), ns, o.Object.GetName(), o.Unit)
			}
		}
	}
}

// managementNamespaces are those of the management cluster's own components.
var managementNamespaces = []string{"cert-manager", "capi-system", "capi-kubeadm-bootstrap-system", "capi-kubeadm-control-plane-system",
	"capd-system", "capo-system", "orc-system", "rke2-bootstrap-system", "rke2-control-plane-system", "flux-system"}

// sentinels are secret values that must never be printed.
var sentinels = []string{"SENTINEL-app-cred-secret-4b1d", "SENTINEL-ca-cert-9f2e"}

func TestSecretsNeverAppearInRenderOutputUnlessAsked(t *testing.T) {
	root := testenv.Checkout(t)
	dir := copyEnv(t, root, "kubeadm-capo", map[string]func(string) string{
		"secrets.yaml": func(s string) string {
			s = strings.Replace(s, "application_credential_secret: FILL-IN", "application_credential_secret: "+sentinels[0], 1)
			return strings.Replace(s, `cacert: ""`, `cacert: "`+sentinels[1]+`"`, 1)
		},
	})
	env, err := loadEnv(t, root, "kubeadm-capo-sentinel", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		context     string
		selfManaged bool
	}{{render.ContextBootstrap, false}, {render.ContextManagement, true}, {render.ContextWorkload, false}} {
		var overrides []values.Layer
		if c.selfManaged {
			overrides = append(overrides, selfManaged())
		}
		res := renderEnv(t, root, env, c.context, overrides...)

		var redacted, shown bytes.Buffer
		if err := render.Write(&redacted, res.Objects, false); err != nil {
			t.Fatal(err)
		}
		if err := render.Write(&shown, res.Objects, true); err != nil {
			t.Fatal(err)
		}
		for _, s := range sentinels {
			if strings.Contains(redacted.String(), s) {
				t.Errorf("context %s: secret value %s printed without --show-secrets", c.context, s)
			}
			// The secret does reach a Secret (the environment's, and the cloud-config of CAPO):
			// without this the check above could not fail.
			if !strings.Contains(shown.String(), s) {
				t.Errorf("context %s: secret value %s missing even with --show-secrets", c.context, s)
			}
		}
		// And only Secrets carry it.
		for _, o := range res.Objects {
			if o.Object.GetKind() == "Secret" {
				continue
			}
			var b bytes.Buffer
			if err := render.Write(&b, []render.Object{o}, true); err != nil {
				t.Fatal(err)
			}
			for _, s := range sentinels {
				if strings.Contains(b.String(), s) {
					t.Errorf("context %s: secret value in %s %s", c.context, o.Object.GetKind(), o.Object.GetName())
				}
			}
		}
	}
}

func TestEveryUnitObjectIsAnnotatedWithItsUnit(t *testing.T) {
	root := testenv.Checkout(t)
	res := renderEnv(t, root, testenv.Environment(t, root, "kubeadm-capd"), render.ContextBootstrap)
	perUnit := map[string]int{}
	for _, o := range res.Objects {
		ann := o.Object.GetAnnotations()
		if ann[names.OriginAnnotation] == "" {
			t.Errorf("%s %s has no %s annotation", o.Object.GetKind(), o.Object.GetName(), names.OriginAnnotation)
		}
		if o.Unit != "" {
			if ann[names.UnitAnnotation] != o.Unit {
				t.Errorf("%s %s: unit annotation %q, want %q", o.Object.GetKind(), o.Object.GetName(), ann[names.UnitAnnotation], o.Unit)
			}
			perUnit[o.Unit]++
		}
	}
	for _, u := range res.Graph.Order {
		if perUnit[u] == 0 && u != "cluster-ready" { // the gate applies nothing, it only waits
			t.Errorf("unit %s rendered no object", u)
		}
	}
	// The HelmRelease unit renders its chart: the Cluster API objects of the cluster.
	kinds := map[string]bool{}
	for _, o := range res.Objects {
		if o.Unit == "cluster" {
			kinds[o.Object.GetKind()] = true
		}
	}
	for _, k := range []string{"HelmRelease", "Cluster", "DockerCluster", "KubeadmControlPlane", "DockerMachineTemplate", "KubeadmConfigTemplate", "MachineDeployment"} {
		if !kinds[k] {
			t.Errorf("unit cluster renders no %s (renders %v)", k, kinds)
		}
	}
}

// --values layers reach the cluster (the release in the cluster sees them too), never with secrets.
func TestOverridesReachTheClusterAsAConfigMap(t *testing.T) {
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capd")
	override := values.FromMap("mirrors.yaml", map[string]any{"registry_mirrors": map[string]any{"hosts_config": map[string]any{
		"quay.io": []any{map[string]any{"mirror_url": "http://mirror.test:5000/v2/quay.io", "override_path": true}}}}})
	res := renderEnv(t, root, env, render.ContextBootstrap, override)
	var cm string
	for _, o := range res.Objects {
		if o.Object.GetKind() == "ConfigMap" && o.Object.GetName() == names.OverridesConfigMap {
			cm, _, _ = unstructuredString(o.Object.Object, "data", "values.yaml")
		}
	}
	if !strings.Contains(cm, "http://mirror.test:5000/v2/quay.io") {
		t.Errorf("ConfigMap %s does not carry the override:\n%s", names.OverridesConfigMap, cm)
	}
	secret := values.FromMap("secret.yaml", map[string]any{"credentials": map[string]any{"git": map[string]any{"password": "x"}}})
	if _, err := render.Render(t.Context(), root, "", render.Options{Env: env, Context: render.ContextBootstrap, Overrides: []values.Layer{secret}}); err == nil || !strings.Contains(err.Error(), "not in --values") {
		t.Errorf("credentials in --values: %v", err)
	}
}

// A change of credentials alone reaches the management cluster: the revision of the Secrets
// bootstrap applied is part of what the management-configs Job carries, so the copy runs again.
func TestSecretsRevisionChangesTheCopyJob(t *testing.T) {
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capd")
	r, err := render.New(root, "v1.37.0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	checksum := func(revision string) string {
		t.Helper()
		res, err := r.Render(t.Context(), render.Options{Env: env, Context: render.ContextBootstrap, SecretsRevision: revision, Units: []string{"management-configs"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			if o.Object.GetKind() == "Job" {
				sum, _, _ := unstructured.NestedString(o.Object.Object, "spec", "template", "metadata", "annotations", "cluster-init.dev/values-checksum")
				if sum == "" {
					t.Fatal("the Job carries no checksum")
				}
				return sum
			}
		}
		t.Fatal("no Job in management-configs")
		return ""
	}
	a, b, again := checksum("cluster-init-secrets=100"), checksum("cluster-init-secrets=101"), checksum("cluster-init-secrets=100")
	if a == b || a != again {
		t.Errorf("checksums %s, %s, %s: want a change with the revision and none without", a, b, again)
	}
}

// An adopted management cluster (bootstrap --adopt) runs the providers and its workload clusters
// from git, and never defines the cluster it runs on, even if a state said self_managed too.
func TestAnAdoptedClusterDefinesNoClusterOfItsOwn(t *testing.T) {
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capd")
	git := map[string]any{"type": "git", "url": "http://git.test/cluster-init.git", "ref": map[string]any{"branch": "main"},
		"secret_ref": "cluster-init-git-auth", "environment": "environment-values/kubeadm-capd"}
	for _, st := range []managementstate.State{{Adopted: true}, {Adopted: true, SelfManaged: true}} {
		res, err := render.Render(t.Context(), root, kubeVersion(t, root), render.Options{Env: env, Context: render.ContextManagement,
			Source: git, State: []values.Layer{st.Layer()}})
		if err != nil {
			t.Fatalf("render with state %+v: %v", st, err)
		}
		enabled := map[string]bool{}
		for _, u := range res.Graph.Enabled() {
			enabled[u.Name] = true
		}
		for _, u := range []string{"cluster", "cni", "cluster-ready", "metrics-server"} {
			if enabled[u] {
				t.Errorf("state %+v: unit %s is enabled: the adopted cluster would define itself", st, u)
			}
		}
		for _, u := range []string{"cluster-init", "cert-manager", "capi", "cabpk", "capd", "environment", "workload-clusters"} {
			if !enabled[u] {
				t.Errorf("state %+v: unit %s is not enabled", st, u)
			}
		}
		for _, o := range res.Objects {
			if o.Object.GetKind() == "Cluster" || o.Object.GetKind() == "KubeadmControlPlane" {
				t.Errorf("state %+v: renders %s %s", st, o.Object.GetKind(), o.Object.GetName())
			}
		}
	}
}

// Flux as bootstrap installs it: in the kind cluster, waiting units are re-checked every second;
// in a cluster that stays, every 5s. Both tolerate the control plane's taint (a new management
// cluster's Flux starts before its workers join), look at readiness every 2s, and let a change
// interrupt a health check. A cluster that stays runs the notification-controller (a push's
// Receiver, alerts) and its controllers send it their events; the kind cluster runs none and
// sends none.
func TestFluxAsBootstrapInstallsIt(t *testing.T) {
	root := testenv.Checkout(t)
	r, err := render.New(root, "v1.37.0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, c := range []struct {
		name        string
		build       func(context.Context) ([]*unstructured.Unstructured, error)
		requeue     string
		controllers []string
		events      bool
	}{
		{"bootstrap", r.BootstrapFlux, "1s", []string{"helm-controller", "kustomize-controller", "source-controller"}, false},
		{"staying", r.Flux, "5s", []string{"helm-controller", "kustomize-controller", "notification-controller", "source-controller"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, err := c.build(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var deployments []string
			for _, o := range objs {
				if o.GetKind() != "Deployment" {
					continue
				}
				deployments = append(deployments, o.GetName())
				containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				c0 := containers[0].(map[string]any)
				args, _, _ := unstructured.NestedStringSlice(c0, "args")
				requeue, events := "", false
				for _, a := range args {
					if v, ok := strings.CutPrefix(a, "--requeue-dependency="); ok {
						requeue = v // the last one wins, as with the controller's flags
					}
					if v, ok := strings.CutPrefix(a, "--events-addr="); ok {
						events = v != ""
					}
				}
				if o.GetName() != "notification-controller" && events != c.events {
					t.Errorf("%s sends its events: %v, want %v (%v)", o.GetName(), events, c.events, args)
				}
				switch o.GetName() {
				case "kustomize-controller", "helm-controller":
					if requeue != c.requeue {
						t.Errorf("%s re-checks dependencies every %q, want %s", o.GetName(), requeue, c.requeue)
					}
				}
				// More reconciles at once than Flux's default (4): a commit has every unit wait
				// for its health checks, and the rest must not queue behind them.
				if o.GetName() == "kustomize-controller" || o.GetName() == "helm-controller" {
					if !slices.Contains(args, "--concurrent=12") {
						t.Errorf("%s reconciles Flux's default number at once: %v", o.GetName(), args)
					}
				}
				if o.GetName() == "kustomize-controller" && !slices.Contains(args, "--feature-gates=CancelHealthCheckOnNewRevision=true") {
					t.Errorf("kustomize-controller: a change does not interrupt a health check: %v", args)
				}
				if period, _, _ := unstructured.NestedInt64(c0, "readinessProbe", "periodSeconds"); period != 2 {
					t.Errorf("%s: readiness looked at every %ds, want 2", o.GetName(), period)
				}
				tolerations, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "tolerations")
				if !slices.ContainsFunc(tolerations, func(x any) bool {
					return x.(map[string]any)["key"] == "node-role.kubernetes.io/control-plane"
				}) {
					t.Errorf("%s does not tolerate the control plane's taint", o.GetName())
				}
			}
			if slices.Sort(deployments); !slices.Equal(deployments, c.controllers) {
				t.Errorf("Flux controllers %v, want %v", deployments, c.controllers)
			}
		})
	}
}

// Each unit waits for the Deployments of the one before it: their readiness is looked at every 2s
// and first within a second (the webhooks of cert-manager and of every provider), instead of up to
// 10s later at each level of the graph.
func TestControllersAreLookedAtQuickly(t *testing.T) {
	root := testenv.Checkout(t)
	for _, env := range []string{"kubeadm-capd", "rke2-capo"} {
		res := renderEnv(t, root, testenv.Environment(t, root, env), render.ContextBootstrap)
		probed := map[string]bool{}
		for _, o := range res.Objects {
			if o.Unit == "" || o.Object.GetKind() != "Deployment" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(o.Object.Object, "spec", "template", "spec", "containers")
			probe, ok, _ := unstructured.NestedMap(containers[0].(map[string]any), "readinessProbe")
			if !ok {
				continue // ready once running
			}
			probed[o.Unit] = true
			period, _, _ := unstructured.NestedInt64(probe, "periodSeconds")
			delay, _, _ := unstructured.NestedInt64(probe, "initialDelaySeconds")
			failures, _, _ := unstructured.NestedInt64(probe, "failureThreshold")
			if period != 2 || delay > 1 || period*failures < 30 {
				t.Errorf("%s: %s/%s: readiness first looked at after %ds, then every %ds, unready after %d failures",
					env, o.Unit, o.Object.GetName(), delay, period, failures)
			}
		}
		for _, unit := range []string{"cert-manager", "capi"} {
			if !probed[unit] {
				t.Errorf("%s: no readiness probe checked in unit %s: %v", env, unit, probed)
			}
		}
	}
}

// A node turns Ready when its CNI configuration appears: flannel's is written once flanneld has
// its lease, by a sidecar that stays (a plain init container would copy it before flanneld runs),
// in both backends, with the shell's $! surviving Flux's substitution.
func TestFlannelConfigurationWaitsForTheLease(t *testing.T) {
	root := testenv.Checkout(t)
	r, err := render.New(root, "v1.37.0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, backend := range []string{"vxlan", "host-gw"} {
		objs, err := r.Build(t.Context(), "cni", "./kustomize-components/cni/flannel-"+backend, map[string]string{"POD_CIDR": "10.244.0.0/16"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range objs {
			if o.GetKind() != "DaemonSet" {
				continue
			}
			inits, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "initContainers")
			for _, c := range inits {
				c := c.(map[string]any)
				if c["name"] != "install-cni" {
					continue
				}
				found = true
				args, _, _ := unstructured.NestedStringSlice(c, "args")
				script := strings.Join(args, " ")
				if c["restartPolicy"] != "Always" || !strings.Contains(script, "until [ -f /run/flannel/subnet.env ]") ||
					!strings.Contains(script, "10-flannel.conflist") || !strings.Contains(script, "wait $!") {
					t.Errorf("%s: install-cni does not wait for the lease as a sidecar: %v", backend, c)
				}
			}
		}
		if !found {
			t.Errorf("%s: no install-cni container", backend)
		}
	}
}

// With git as the source, the management cluster places applications: the Application CRD, its
// controller (this project's image) and the Kustomization of clusters/<name>/apps, after the
// substitutions of the unit.
func TestApplicationsArePlacedFromGit(t *testing.T) {
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capd")
	git := map[string]any{"type": "git", "url": "http://git.test/cluster-init.git", "ref": map[string]any{"branch": "main"},
		"secret_ref": "cluster-init-git-auth", "environment": "environment-values/kubeadm-capd"}
	res, err := render.Render(t.Context(), root, kubeVersion(t, root), render.Options{Env: env, Context: render.ContextManagement,
		Source: git, State: []values.Layer{managementstate.State{SelfManaged: true}.Layer()}})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, o := range res.Objects {
		if o.Unit != "applications" {
			continue
		}
		obj := o.Object
		found[obj.GetKind()+"/"+obj.GetName()] = true
		switch obj.GetKind() + "/" + obj.GetName() {
		case "Deployment/management-controllers":
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			if c["image"] != "cluster-init/bootstrap:v0.1.0" || !slices.Equal(args, []string{"management-controllers", "--management-cluster=cluster-init/management", "--on-management=true", "--selector-namespaces=cluster-init"}) || obj.GetNamespace() != "cluster-init" {
				t.Errorf("placement controller: image %v, args %v, namespace %s", c["image"], args, obj.GetNamespace())
			}
		case "Kustomization/applications-from-git":
			path, _, _ := unstructured.NestedString(obj.Object, "spec", "path")
			if path != "./clusters/management/apps" {
				t.Errorf("the applications are read from %s", path)
			}
			// Applied as the platform's account that writes Applications, not as the controller.
			if sa, _, _ := unstructured.NestedString(obj.Object, "spec", "serviceAccountName"); sa != "applications-from-git" {
				t.Errorf("the applications are applied as %q", sa)
			}
		}
	}
	for _, want := range []string{"CustomResourceDefinition/applications.apps.cluster-init.dev", "Deployment/management-controllers", "Kustomization/applications-from-git", "ClusterRole/cluster-init-management-controllers",
		"Role/applications-from-git", "RoleBinding/applications-from-git", "ServiceAccount/applications-from-git"} {
		if !found[want] {
			t.Errorf("unit applications lacks %s: %v", want, found)
		}
	}
	// The values' rules reach the controller: tenants' namespaces for selectors, the management
	// cluster kept off.
	res, err = render.Render(t.Context(), root, kubeVersion(t, root), render.Options{Env: env, Context: render.ContextManagement,
		Source: git, State: []values.Layer{managementstate.State{SelfManaged: true}.Layer()},
		Overrides: []values.Layer{values.FromMap("(test)", map[string]any{"applications": map[string]any{"on_management": false, "selector_namespaces": []any{"team-b", "cluster-init"}}})}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		if o.Unit == "applications" && o.Object.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(o.Object.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			if !slices.Equal(args[2:], []string{"--on-management=false", "--selector-namespaces=cluster-init,team-b"}) {
				t.Errorf("the controller's rules from the values: %v", args)
			}
		}
	}
	// Without git there are no commits to place applications from.
	res = renderEnv(t, root, env, render.ContextManagement)
	if u, ok := res.Graph.Units["applications"]; !ok || u.Enabled {
		t.Errorf("applications without git: %+v", u)
	}
}

// A standalone cluster gets nothing that would make it a management cluster, and the graph's
// DependenciesOf the cluster unit is exactly what a temporary management cluster runs.
func TestAStandaloneClusterIsPreparedForNoManagement(t *testing.T) {
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capd")
	// standalone alone, without pivot: false: the chart itself must keep the pivot out.
	standalone := values.FromMap("(--standalone)", map[string]any{"standalone": true})
	res, err := render.Render(t.Context(), root, kubeVersion(t, root), render.Options{Env: env, Context: render.ContextBootstrap,
		Overrides: []values.Layer{standalone}})
	if err != nil {
		t.Fatal(err)
	}
	var enabled []string
	for _, u := range res.Graph.Enabled() {
		enabled = append(enabled, u.Name)
	}
	for _, u := range []string{"management-flux", "management-configs", "management-cluster-init", "pivot"} {
		if slices.Contains(enabled, u) {
			t.Errorf("unit %s is enabled for a standalone cluster", u)
		}
	}
	for _, u := range []string{"cluster", "cni", "cluster-ready"} {
		if !slices.Contains(enabled, u) {
			t.Errorf("unit %s is not enabled for a standalone cluster", u)
		}
	}
	if got, want := res.Graph.DependenciesOf("cluster"), []string{"cert-manager", "capi", "cabpk", "capd"}; !slices.Equal(got, want) {
		t.Errorf("DependenciesOf(cluster) = %v, want %v", got, want)
	}
}

// The units that gate on the Cluster (its control plane initialized, then every machine up) pass
// only once Cluster API reports that condition True: a Cluster whose status does not carry it yet
// (just created, or reconciled once without it) is still in progress. Evaluated with Flux's own
// evaluator of health check expressions.
func TestClusterGatesWaitForTheirCondition(t *testing.T) {
	root := testenv.Checkout(t)
	res := renderEnv(t, root, testenv.Environment(t, root, "kubeadm-capd"), render.ContextBootstrap)
	gates := map[string]string{"cluster": "ControlPlaneInitialized", "cluster-ready": "Available"}
	for _, o := range res.Objects {
		condition, ok := gates[o.Object.GetName()]
		if o.Unit != "" || o.Object.GetKind() != "Kustomization" || !ok {
			continue
		}
		delete(gates, o.Object.GetName())
		exprs, _, _ := unstructured.NestedSlice(o.Object.Object, "spec", "healthCheckExprs")
		if len(exprs) != 1 {
			t.Fatalf("unit %s: %d health check expressions, want 1 (the Cluster's)", o.Object.GetName(), len(exprs))
		}
		current, _ := exprs[0].(map[string]any)["current"].(string)
		eval, err := cel.NewStatusEvaluator(&kustomize.HealthCheckExpressions{Current: current})
		if err != nil {
			t.Fatalf("unit %s: %v", o.Object.GetName(), err)
		}
		cond := func(typ, status string) any { return map[string]any{"type": typ, "status": status} }
		for _, c := range []struct {
			name       string
			conditions []any
			want       status.Status
		}{
			{"no condition yet", []any{}, status.InProgressStatus},
			{"other conditions only", []any{cond("InfrastructureReady", "True")}, status.InProgressStatus},
			{"condition false", []any{cond("InfrastructureReady", "True"), cond(condition, "False")}, status.InProgressStatus},
			{"condition true", []any{cond("InfrastructureReady", "True"), cond(condition, "True")}, status.CurrentStatus},
		} {
			cluster := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
				"metadata": map[string]any{"name": "management", "generation": int64(1)},
				"status":   map[string]any{"observedGeneration": int64(1), "conditions": c.conditions},
			}}
			got, err := eval.Evaluate(context.Background(), cluster)
			if err != nil {
				t.Fatalf("unit %s, %s: %v", o.Object.GetName(), c.name, err)
			}
			if got.Status != c.want {
				t.Errorf("unit %s, %s: %s, want %s (expression %s)", o.Object.GetName(), c.name, got.Status, c.want, current)
			}
		}
	}
	if len(gates) > 0 {
		t.Errorf("no Kustomization for units %v", slices.Collect(maps.Keys(gates)))
	}
}

// A change of cluster.kubernetes_version alone takes the kind node image of the new version: the
// chart's machine templates and the CLI's view of the values (values.ClusterSettings.CAPDNodeImage,
// which `bootstrap images` lists) agree, and an explicit node image still wins.
func TestTheNodeImageFollowsTheKubernetesVersion(t *testing.T) {
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capd")
	for _, tc := range []struct {
		cluster map[string]any
		want    string
	}{
		{map[string]any{"kubernetes_version": "v1.36.3"}, "kindest/node:v1.36.3"},
		{map[string]any{"kubernetes_version": "v1.36.3", "capd": map[string]any{"node_image": "registry.example/node:v1.36.3"}}, "registry.example/node:v1.36.3"},
	} {
		override := values.FromMap("(test)", map[string]any{"cluster": tc.cluster})
		res, err := render.Render(t.Context(), root, "", render.Options{Env: env, Context: render.ContextBootstrap, Overrides: []values.Layer{override}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Settings.Cluster.CAPDNodeImage(); got != tc.want {
			t.Errorf("%v: the CLI's node image %s, want %s", tc.cluster, got, tc.want)
		}
		var templates int
		for _, o := range res.Objects {
			if o.Object.GetKind() != "DockerMachineTemplate" {
				continue
			}
			templates++
			if got, _, _ := unstructured.NestedString(o.Object.Object, "spec", "template", "spec", "customImage"); got != tc.want {
				t.Errorf("%v: DockerMachineTemplate %s has %s, want %s", tc.cluster, o.Object.GetName(), got, tc.want)
			}
		}
		if templates != 2 {
			t.Errorf("%v: %d DockerMachineTemplates, want the control plane's and the workers'", tc.cluster, templates)
		}
	}
}

// The kind cluster cleanup takes a self-managed cluster back into (providers_only, bootstrap
// context, its source the checkout pushed next to it): the environment's providers, and no
// cluster, nothing of a management to come, no pivot; the Receiver node port the environment asks
// for its management cluster (with a git source) is no reason to refuse it.
func TestTheProvidersOnlyForATakeBack(t *testing.T) {
	root := testenv.Checkout(t)
	dir := copyEnv(t, root, "kubeadm-capd", map[string]func(string) string{
		"secrets.yaml": func(string) string {
			return "credentials:\n  notifications:\n    receiver_token: receiver-token-6b1f0c2e\n"
		},
		"values.yaml": func(old string) string { return old + "notifications:\n  receiver:\n    node_port: 30292\n" },
	})
	env, err := loadEnv(t, root, "kubeadm-capd", dir)
	if err != nil {
		t.Fatal(err)
	}
	oci := map[string]any{"type": "oci", "url": "oci://cluster-init-registry:5000/cluster-init"}
	renderWith := func(overrides ...values.Layer) (*render.Result, error) {
		return render.Render(t.Context(), root, kubeVersion(t, root), render.Options{Env: env, Context: render.ContextBootstrap, Source: oci, Overrides: overrides})
	}
	if _, err := renderWith(); err == nil || !strings.Contains(err.Error(), "notifications.receiver.node_port") {
		t.Fatalf("a node port with an OCI source, not for a take-back: %v, want the node port refused", err)
	}
	res, err := renderWith(values.FromMap("(test)", map[string]any{"providers_only": true}))
	if err != nil {
		t.Fatal(err)
	}
	enabled := map[string]bool{}
	for _, u := range res.Graph.Enabled() {
		enabled[u.Name] = true
	}
	for _, u := range []string{"cluster", "cni", "cluster-ready", "management-flux", "management-configs", "management-cluster-init", "pivot"} {
		if enabled[u] {
			t.Errorf("unit %s is enabled in the kind cluster of a take-back", u)
		}
	}
	for _, u := range []string{"cluster-init", "cert-manager", "capi", "cabpk", "capd"} {
		if !enabled[u] {
			t.Errorf("unit %s is not enabled: the take-back needs the providers", u)
		}
	}
}

// The values of a highly available cluster reach its definitions: the health checks' timeouts and
// share of workers, the certificates' roll, and on OpenStack the API behind a load balancer.
func TestHighAvailabilityValuesReachTheClusterDefinitions(t *testing.T) {
	root := testenv.Checkout(t)
	for _, tc := range []struct {
		env     string
		cluster map[string]any
		want    map[string]string // kind/name field path -> value, as JSON
	}{
		{"kubeadm-capd", nil, map[string]string{
			"MachineHealthCheck/management-control-plane spec.checks.nodeStartupTimeoutSeconds":           "1200",
			"MachineHealthCheck/management-workers spec.checks.unhealthyNodeConditions":                   `[{"status":"Unknown","timeoutSeconds":300,"type":"Ready"}]`,
			"MachineHealthCheck/management-workers spec.remediation.triggerIf.unhealthyLessThanOrEqualTo": "1",
			"KubeadmControlPlane/management-control-plane spec.rollout.before.certificatesExpiryDays":     "30",
			"KubeadmControlPlane/management-control-plane spec.replicas":                                  "1",
		}},
		{"kubeadm-capd", map[string]any{
			"control_plane": map[string]any{"replicas": 3, "roll_days_before_certificates_expire": 60},
			"workers":       map[string]any{"replicas": 10},
			"health_checks": map[string]any{"node_startup_timeout_seconds": 600, "node_unreachable_timeout_seconds": 45, "workers_max_unhealthy_percent": 30},
		}, map[string]string{
			"MachineHealthCheck/management-control-plane spec.checks.nodeStartupTimeoutSeconds":           "600",
			"MachineHealthCheck/management-control-plane spec.checks.unhealthyNodeConditions":             `[{"status":"Unknown","timeoutSeconds":45,"type":"Ready"}]`,
			"MachineHealthCheck/management-workers spec.remediation.triggerIf.unhealthyLessThanOrEqualTo": "3",
			"KubeadmControlPlane/management-control-plane spec.rollout.before.certificatesExpiryDays":     "60",
			"KubeadmControlPlane/management-control-plane spec.replicas":                                  "3",
		}},
		{"kubeadm-capo", nil, map[string]string{
			"OpenStackCluster/management spec.apiServerLoadBalancer":     `{"enabled":true}`,
			"KubeadmControlPlane/management-control-plane spec.replicas": "3",
		}},
		{"kubeadm-capo", map[string]any{
			"control_plane": map[string]any{"replicas": 1},
			"capo":          map[string]any{"api_server_load_balancer": map[string]any{"enabled": false}},
		}, map[string]string{
			"OpenStackCluster/management spec.apiServerLoadBalancer": "<none>",
		}},
	} {
		env := testenv.Environment(t, root, tc.env)
		var overrides []values.Layer
		if tc.cluster != nil {
			overrides = append(overrides, values.FromMap("(test)", map[string]any{"cluster": tc.cluster}))
		}
		res := renderEnv(t, root, env, render.ContextBootstrap, overrides...)
		got := map[string]string{}
		for _, o := range res.Objects {
			for key := range tc.want {
				ref, path, _ := strings.Cut(key, " ")
				if o.Object.GetKind()+"/"+o.Object.GetName() != ref {
					continue
				}
				v, found, err := unstructured.NestedFieldNoCopy(o.Object.Object, strings.Split(path, ".")...)
				if err != nil {
					t.Fatal(err)
				}
				got[key] = "<none>"
				if found {
					data, _ := json.Marshal(v)
					got[key] = string(data)
				}
			}
		}
		for key, want := range tc.want {
			if got[key] != want {
				t.Errorf("%s %v: %s = %s, want %s", tc.env, tc.cluster, key, got[key], want)
			}
		}
	}
}
