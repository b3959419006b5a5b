package tenantsources

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// source stands for source-controller's artifact server: it serves what the test puts.
type source struct {
	mu    sync.Mutex
	files map[string][]byte
	fail  bool
}

func (s *source) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.files[r.URL.Path]
	if s.fail || !ok {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write(data)
}

// publish serves data as the artifact of the tenant's GitRepository at revision, as
// source-controller would.
func publish(t *testing.T, c client.Client, srv *httptest.Server, src *source, tenant, revision string, data []byte) {
	t.Helper()
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	path := "/gitrepository/platform/tenant-" + tenant + "/" + hex.EncodeToString(sum[:]) + ".tar.gz"
	src.mu.Lock()
	src.files[path] = data
	src.mu.Unlock()
	repo := &sourcev1.GitRepository{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "platform", Name: names.TenantSourceOf(tenant)}, repo); err != nil {
		t.Fatal(err)
	}
	repo.Status.Artifact = &meta.Artifact{Path: path, URL: srv.URL + path, Revision: revision, Digest: digest, LastUpdateTime: metav1.Now()}
	if err := c.Status().Update(t.Context(), repo); err != nil {
		t.Fatal(err)
	}
}

func handedOn(t *testing.T, c client.Client, tenant string) *sourcev1.ExternalArtifact {
	t.Helper()
	ea := &sourcev1.ExternalArtifact{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: tenant, Name: names.TenantCheckedSource}, ea); err != nil {
		t.Fatal(err)
	}
	return ea
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	data, _ := io.ReadAll(resp.Body)
	return data
}

// A tenant's directory is handed on to its Kustomization as it was fetched, once checked; a
// commit past a bound is not, and the tenant reads why in its namespace (the ExternalArtifact and
// an event on its Kustomization); a source that cannot be read keeps what was handed on; the next
// good commit is handed on again. Only the platform's namespace and tenants' namespaces count.
func TestATenantsDirectoryIsHandedOnOnlyWithinItsBounds(t *testing.T) {
	cl := testenv.Start(t, "tenant-sources")
	c := cl.Client
	ctx := t.Context()
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "platform"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{names.TenantLabel: "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "not-a-tenant"}},
	} {
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	for _, repo := range []struct{ ns, tenant string }{{"platform", "team-a"}, {"platform", "not-a-tenant"}, {"team-a", "team-a"}} {
		r := &sourcev1.GitRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: repo.ns, Name: names.TenantSourceOf(repo.tenant), Labels: map[string]string{names.TenantLabel: repo.tenant}},
			Spec:       sourcev1.GitRepositorySpec{URL: "https://git.example.invalid/x.git", Interval: metav1.Duration{Duration: 60e9}},
		}
		if err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// The tenant's Kustomization, as kustomize-controller keeps it: its own Ready condition.
	tenantKs := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: names.TenantKustomization},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: 60e9}, Path: "./clusters", Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.ExternalArtifactKind, Name: names.TenantCheckedSource}}}
	if err := c.Create(ctx, tenantKs); err != nil {
		t.Fatal(err)
	}
	apimeta.SetStatusCondition(&tenantKs.Status.Conditions, metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded", Message: "Applied revision"})
	if err := c.Status().Update(ctx, tenantKs); err != nil {
		t.Fatal(err)
	}
	kustomizationConditions := func() []metav1.Condition {
		k := &kustomizev1.Kustomization{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tenantKs), k); err != nil {
			t.Fatal(err)
		}
		return k.Status.Conditions
	}
	src := &source{files: map[string][]byte{}}
	upstream := httptest.NewServer(src)
	defer upstream.Close()
	store := &Store{Dir: t.TempDir()}
	served := httptest.NewServer(store)
	defer served.Close()
	store.BaseURL = served.URL
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Namespace: "platform", Store: store, HTTP: upstream.Client(), Bounds: testBounds(), Events: rec, Direct: c}
	reconcile := func(ns, tenant string) error {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: names.TenantSourceOf(tenant)}})
		return err
	}

	good := tarball(t, entry{name: "clusters/wl1/cluster.yaml", data: cluster})
	publish(t, c, upstream, src, "team-a", "main@sha1:1111", good)
	if err := reconcile("platform", "team-a"); err != nil {
		t.Fatal(err)
	}
	ea := handedOn(t, c, "team-a")
	if ea.Status.Artifact == nil || ea.Status.Artifact.Revision != "main@sha1:1111" || !apimeta.IsStatusConditionTrue(ea.Status.Conditions, meta.ReadyCondition) {
		t.Fatalf("handed on: %+v", ea.Status)
	}
	goodURL := ea.Status.Artifact.URL
	if got := get(t, goodURL); !bytes.Equal(got, good) {
		t.Errorf("the store serves %d bytes, want the %d fetched", len(got), len(good))
	}

	// A commit with a file no controller could parse within bounds.
	bomb := tarball(t, entry{name: "clusters/wl1/cluster.yaml", data: cluster}, entry{name: "clusters/bomb.yaml", data: "a: &a [1]\nb: [*a]"})
	publish(t, c, upstream, src, "team-a", "main@sha1:2222", bomb)
	if err := reconcile("platform", "team-a"); err != nil {
		t.Fatal(err)
	}
	ea = handedOn(t, c, "team-a")
	ready := apimeta.FindStatusCondition(ea.Status.Conditions, meta.ReadyCondition)
	if ea.Status.Artifact != nil || ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != ReasonRefused ||
		!strings.Contains(ready.Message, "revision main@sha1:2222 refused: bomb.yaml: its YAML aliases") {
		t.Fatalf("refused: %+v", ea.Status)
	}
	if got := get(t, goodURL); got != nil {
		t.Errorf("the store still serves the commit before the refused one")
	}
	refusedCond := apimeta.FindStatusCondition(kustomizationConditions(), ConditionSourceRefused)
	if refusedCond == nil || refusedCond.Status != metav1.ConditionTrue || !strings.Contains(refusedCond.Message, "bomb.yaml") ||
		!apimeta.IsStatusConditionTrue(kustomizationConditions(), meta.ReadyCondition) {
		t.Errorf("the tenant's Kustomization's status: %+v", kustomizationConditions())
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, ReasonRefused) || !strings.Contains(e, "bomb.yaml") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event on the tenant's Kustomization")
	}

	// The source cannot be read: what was handed on (nothing, here) stays, and it is an error.
	fixed := tarball(t, entry{name: "clusters/wl1/cluster.yaml", data: cluster + "# fixed\n"})
	publish(t, c, upstream, src, "team-a", "main@sha1:3333", fixed)
	src.mu.Lock()
	src.fail = true
	src.mu.Unlock()
	if err := reconcile("platform", "team-a"); err == nil {
		t.Error("a source that cannot be read is no error")
	}
	if ready := apimeta.FindStatusCondition(handedOn(t, c, "team-a").Status.Conditions, meta.ReadyCondition); ready.Reason != ReasonFetchFailed {
		t.Errorf("reason %s", ready.Reason)
	}
	src.mu.Lock()
	src.fail = false
	src.mu.Unlock()
	if err := reconcile("platform", "team-a"); err != nil {
		t.Fatal(err)
	}
	ea = handedOn(t, c, "team-a")
	if ea.Status.Artifact == nil || ea.Status.Artifact.Revision != "main@sha1:3333" || !bytes.Equal(get(t, ea.Status.Artifact.URL), fixed) {
		t.Fatalf("the fixed commit is not handed on: %+v", ea.Status)
	}
	if apimeta.FindStatusCondition(kustomizationConditions(), ConditionSourceRefused) != nil {
		t.Errorf("the refusal stays on the tenant's Kustomization: %+v", kustomizationConditions())
	}

	// Not the platform's namespace, not a tenant's namespace: nothing made.
	for _, req := range []struct{ ns, tenant string }{{"team-a", "team-a"}, {"platform", "not-a-tenant"}} {
		if err := reconcile(req.ns, req.tenant); err != nil {
			t.Fatal(err)
		}
	}
	list := &sourcev1.ExternalArtifactList{}
	if err := c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d ExternalArtifacts, want the tenant's alone", len(list.Items))
	}
}

// The store serves its artifacts' paths and nothing else of its directory.
func TestTheStoreServesArtifactsOnly(t *testing.T) {
	store := &Store{Dir: t.TempDir(), BaseURL: "http://x"}
	digest := "sha256:" + strings.Repeat("a", 64)
	rel, err := store.Put("team-a", digest, []byte("data"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(store)
	defer srv.Close()
	if got := get(t, srv.URL+"/"+rel); string(got) != "data" {
		t.Errorf("GET %s: %q", rel, got)
	}
	for _, p := range []string{"/team-a/", "/", "/team-a/../team-a/" + strings.Repeat("a", 64) + ".tar.gz", "/Team-A/" + strings.Repeat("a", 64) + ".tar.gz"} {
		if got := get(t, srv.URL+p); got != nil {
			t.Errorf("GET %s served %q", p, got)
		}
	}
	if _, err := store.Put("team-a", "sha256:"+strings.Repeat("b", 64), []byte("new")); err != nil {
		t.Fatal(err)
	}
	if store.Has(rel) {
		t.Error("an earlier artifact of the tenant is kept")
	}
}
