package workloads_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/clusteraccess"
	"cluster-init.dev/cluster-init/internal/kubeconfigreaders"
	"cluster-init.dev/cluster-init/internal/names"
)

// placementController is the account of the placement controller, which keeps the kubeconfigs
// the tenants' people may get.
var placementController = "system:serviceaccount:" + names.Namespace + ":management-controllers"

// runKubeconfigReaders installs the placement controller's RBAC as the applications unit does,
// and runs the kubeconfig readers' reconciler as that account, with the cache it runs with: what
// it does here, its RBAC lets it do in a management cluster.
func (tb *tenantTestbed) runKubeconfigReaders(t *testing.T) {
	t.Helper()
	if err := tb.c.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.Namespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	rbac, err := os.ReadFile(filepath.Join("..", "..", "kustomize-components", "applications", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ssautil.ReadObjects(strings.NewReader(strings.ReplaceAll(string(rbac), "${NAMESPACE}", names.Namespace)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apply.New(tb.c).Apply(t.Context(), objs); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(tb.c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: placementController,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + names.Namespace, "system:authenticated"}}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: tb.c.Client.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: kubeconfigreaders.CacheOptions()}, Logger: funcr.New(func(p, a string) { t.Log(p, a) }, funcr.Options{}),
		// One controller per test's manager: the name is not reused within one manager.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&kubeconfigreaders.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the kubeconfig readers' controller: %v", err)
		}
	})
}

// eventually waits until ok holds (the controller acts within a second or so).
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return ok(), nil
	}); err != nil {
		t.Fatalf("%s: never", what)
	}
}

// A tenant's people get the kubeconfig of each of its clusters while the cluster exists, and no
// other Secret of the namespace: not the platform's cloud credentials kept there, not Cluster
// API's certificate authority of the same cluster, not Helm's records.
func TestATenantsPeopleGetTheirClustersKubeconfigsOnly(t *testing.T) {
	tb := startTenantTestbed(t)
	tb.runKubeconfigReaders(t)
	const ns = "workload-clusters"
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"value": []byte("secret of " + name)}}
	}
	for _, o := range []client.Object{secret("wl1-kubeconfig"), secret("wl1-ca"), secret("wl2-kubeconfig"),
		secret("cluster-init.openstack"), secret("sh.helm.release.v1.wl1.v1")} {
		if err := tb.c.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	people := tb.as(t, alice)
	canGet := func(name string) bool {
		return people.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}) == nil
	}
	// No cluster yet: no Secret at all, and the Role grants nothing (a rule with no names would
	// grant every Secret).
	if canGet("wl1-kubeconfig") {
		t.Fatal("a kubeconfig is readable before its cluster exists")
	}
	// A Role of that name in the platform's namespace, where the management cluster is, is none of
	// the tenants': the controller leaves it alone.
	platformRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: names.TenantReadersKubeconfigsRole}, Rules: []rbacv1.PolicyRule{}}
	management := obj("cluster.x-k8s.io/v1beta2", "Cluster", "wl-management", map[string]any{"spec": map[string]any{"paused": true}})()
	management.SetNamespace(names.Namespace)
	for _, o := range []client.Object{platformRole, management} {
		if err := tb.c.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	cluster := obj("cluster.x-k8s.io/v1beta2", "Cluster", "wl1", map[string]any{"spec": map[string]any{"paused": true}})()
	cluster.SetNamespace(ns)
	if err := tb.c.Client.Create(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the people of the tenant get wl1's kubeconfig", func() bool { return canGet("wl1-kubeconfig") })
	if err := tb.c.Client.Get(t.Context(), client.ObjectKeyFromObject(platformRole), platformRole); err != nil || len(platformRole.Rules) != 0 {
		t.Errorf("the Role in the platform's namespace: %v %v", platformRole.Rules, err)
	}
	key, err := clusteraccess.Find(t.Context(), people, ns, "wl1")
	if err != nil {
		t.Fatal(err)
	}
	if data, err := clusteraccess.Kubeconfig(t.Context(), people, key); err != nil || string(data) != "secret of wl1-kubeconfig" {
		t.Errorf("bootstrap kubeconfig, as the tenant's people: %q %v", data, err)
	}
	for _, name := range []string{"cluster-init.openstack", "wl1-ca", "sh.helm.release.v1.wl1.v1", "wl2-kubeconfig"} {
		if canGet(name) {
			t.Errorf("the tenant's people read Secret %s", name)
		}
	}
	if err := people.List(t.Context(), &corev1.SecretList{}, client.InNamespace(ns)); err == nil {
		t.Error("the tenant's people list the Secrets of the namespace")
	}
	// Its cluster gone, its kubeconfig is no longer theirs (a cluster of that name may come back,
	// made by someone else of the tenant).
	if err := tb.c.Client.Delete(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	eventually(t, "wl1's kubeconfig no longer readable once wl1 is gone", func() bool { return !canGet("wl1-kubeconfig") })
	if err := tb.c.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: names.TenantReadersKubeconfigsRole}, &role); err != nil || len(role.Rules) != 0 {
		t.Errorf("the Role with no cluster: %v %v", role.Rules, err)
	}
}

// The Role that names the kubeconfigs grants nothing else, whoever writes it; the placement
// controller's account may write that Role and no other, and read no Secret.
func TestTheKubeconfigReadersRoleGrantsNothingElse(t *testing.T) {
	tb := startTenantTestbed(t)
	tb.runKubeconfigReaders(t)
	controller := tb.as(t, placementController)
	const ns = "workload-clusters"
	rule := func(verbs []string, resources []string, names ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: resources, Verbs: verbs, ResourceNames: names}
	}
	for _, c := range []struct {
		name  string
		rules []rbacv1.PolicyRule
	}{
		{"every Secret", []rbacv1.PolicyRule{rule([]string{"get"}, []string{"secrets"})}},
		{"the cloud's credentials", []rbacv1.PolicyRule{rule([]string{"get"}, []string{"secrets"}, "cluster-init.openstack")}},
		{"a kubeconfig and a certificate authority", []rbacv1.PolicyRule{rule([]string{"get"}, []string{"secrets"}, "wl1-kubeconfig", "wl1-ca")}},
		{"the list of Secrets", []rbacv1.PolicyRule{rule([]string{"get", "list"}, []string{"secrets"}, "wl1-kubeconfig")}},
		{"another resource", []rbacv1.PolicyRule{rule([]string{"get"}, []string{"secrets", "configmaps"}, "wl1-kubeconfig")}},
		{"a second rule", []rbacv1.PolicyRule{rule([]string{"get"}, []string{"secrets"}, "wl1-kubeconfig"),
			{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"clusters"}, Verbs: []string{"update"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for who, cl := range map[string]client.Client{"the placement controller": controller, "the platform": tb.c.Client} {
				var role rbacv1.Role
				if err := tb.c.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: names.TenantReadersKubeconfigsRole}, &role); err != nil {
					t.Fatal(err)
				}
				role.Rules = c.rules
				err := cl.Update(t.Context(), &role, client.DryRunAll)
				if err == nil || !strings.Contains(err.Error(), "grants the get of Secrets named <cluster>-kubeconfig") {
					t.Errorf("%s: %v, want the policy's refusal", who, err)
				}
			}
		})
	}
	// Its account writes no other Role (the tenant's people's other one, the builder's), makes
	// none, and reads no Secret.
	for _, name := range []string{"tenant-readers", names.TenantBuilder} {
		var role rbacv1.Role
		if err := tb.c.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &role); err != nil {
			t.Fatal(err)
		}
		role.Rules = append(role.Rules, rule([]string{"get"}, []string{"secrets"}, "wl1-kubeconfig"))
		if err := controller.Update(t.Context(), &role, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("the placement controller updates Role %s: %v", name, err)
		}
	}
	// The chart makes it without rules, as a new tenant's comes: admitted.
	if err := tb.c.Client.Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: names.TenantReadersKubeconfigsRole}}, client.DryRunAll); err != nil {
		t.Errorf("the Role without rules: %v", err)
	}
	made := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: names.TenantReadersKubeconfigsRole}}
	if err := controller.Create(t.Context(), made, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("the placement controller makes a Role: %v", err)
	}
	if err := controller.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "wl1-kubeconfig"}, &corev1.Secret{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("the placement controller reads a Secret: %v", err)
	}
}
