// Package tenantsources is the platform's gate between a tenant's directory and the controllers
// that build it.
//
// kustomize expands YAML aliases with no bound, and kustomize-controller parses every YAML file of
// a directory that has no kustomization file: one small file of a tenant can take all the memory
// of the controller that builds it. Each tenant's Flux objects are reconciled by a shard of their
// own (kustomize-components/flux-shard), so that such a file stops that shard only; and before any
// controller parses the directory, this gate reads it from source-controller and checks it within
// Bounds. A directory within them is handed, byte for byte, to the tenant's Kustomization as the
// ExternalArtifact of its namespace (Flux's source generator API), served by Store; a directory
// past one is not handed on, and the ExternalArtifact says why (Ready False, ArtifactRefused,
// naming the file and the bound), as does an event on the tenant's Kustomization. The tenant's
// Kustomization then finds no artifact and applies nothing: its clusters stay as they were until
// a commit fixes the directory.
//
// The gate trusts only the platform's namespace: the tenants' GitRepositories are there (label
// cluster-init.dev/tenant names the tenant, whose namespace must be labelled as a tenant's).
package tenantsources

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"

	"cluster-init.dev/cluster-init/internal/names"
)

// Condition reasons of the ExternalArtifact.
const (
	// ReasonRefused: the directory is past a bound; the tenant's to fix.
	ReasonRefused = "ArtifactRefused"
	// ReasonFetchFailed: the source could not be read; tried again.
	ReasonFetchFailed = "FetchFailed"
)

// Reconciler checks each tenant's directory and hands it on.
type Reconciler struct {
	Client client.Client
	// Namespace is the platform's, where the tenants' GitRepositories are.
	Namespace string
	Store     *Store
	HTTP      *http.Client
	Bounds    Bounds
	// Events, if set, records a refusal on the tenant's Kustomization.
	Events events.EventRecorder
	// Direct, if set, reads the tenants' Kustomizations (not cached), to mark a refusal in their
	// status (ConditionSourceRefused).
	Direct client.Reader
	// Resync looks at every directory again this often (a store lost with its pod is refilled).
	Resync time.Duration
}

// SetupWithManager watches the tenants' GitRepositories of the platform's namespace, and the
// tenants' ExternalArtifacts (one changed or deleted by anyone is set again).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ofTenant := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Namespace && o.GetLabels()[names.TenantLabel] != ""
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("tenant-sources").
		For(&sourcev1.GitRepository{}, builder.WithPredicates(ofTenant)).
		Watches(&sourcev1.ExternalArtifact{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if o.GetName() != names.TenantCheckedSource {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: names.TenantSourceOf(o.GetNamespace())}}}
		})).
		Complete(r)
}

// Reconcile checks the artifact of a tenant's GitRepository and sets the tenant's ExternalArtifact.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var repo sourcev1.GitRepository
	if err := r.Client.Get(ctx, req.NamespacedName, &repo); apierrors.IsNotFound(err) {
		// The tenant went: what was kept of its directory goes too.
		if tenant, ok := strings.CutPrefix(req.Name, names.TenantSourceOf("")); ok && req.Namespace == r.Namespace {
			return ctrl.Result{}, r.Store.Drop(tenant)
		}
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("read GitRepository %s: %w", req.NamespacedName, err)
	}
	tenant := repo.Labels[names.TenantLabel]
	if req.Namespace != r.Namespace || tenant == "" || req.Name != names.TenantSourceOf(tenant) {
		return ctrl.Result{}, nil
	}
	var ns corev1.Namespace
	if err := r.Client.Get(ctx, client.ObjectKey{Name: tenant}, &ns); apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.Store.Drop(tenant)
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("read namespace %s: %w", tenant, err)
	}
	if ns.Labels[names.TenantLabel] != "true" || !ns.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	src := repo.Status.Artifact
	if src == nil {
		return ctrl.Result{}, nil // no revision yet: source-controller's status says why
	}
	ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: names.TenantCheckedSource}}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(ea), ea); apierrors.IsNotFound(err) {
		ea.Labels = names.Labels(false)
		ea.Spec.SourceRef = &meta.NamespacedObjectKindReference{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.GitRepositoryKind, Name: repo.Name, Namespace: repo.Namespace}
		if err := r.Client.Create(ctx, ea); err != nil {
			return ctrl.Result{}, fmt.Errorf("create the ExternalArtifact of tenant %s: %w", tenant, err)
		}
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("read the ExternalArtifact of tenant %s: %w", tenant, err)
	}
	resync := ctrl.Result{RequeueAfter: r.Resync}
	// Handed on already, and still served.
	if a := ea.Status.Artifact; a != nil && a.Revision == src.Revision && a.Digest == src.Digest && r.Store.Has(relPath(tenant, src.Digest)) && apimeta.IsStatusConditionTrue(ea.Status.Conditions, meta.ReadyCondition) {
		return resync, nil
	}
	// Refused already: the reason of a revision does not change.
	if c := apimeta.FindStatusCondition(ea.Status.Conditions, meta.ReadyCondition); c != nil && c.Reason == ReasonRefused &&
		ea.Status.Artifact == nil && strings.HasPrefix(c.Message, refusedAt(src.Revision, "")) {
		return resync, nil
	}

	sum, err := r.check(ctx, tenant, src)
	switch {
	case IsRefused(err):
		if err := r.Store.Drop(tenant); err != nil {
			return ctrl.Result{}, err
		}
		msg := refusedAt(src.Revision, err.Error())
		if err := r.setStatus(ctx, ea, nil, metav1.ConditionFalse, ReasonRefused, msg); err != nil {
			return ctrl.Result{}, err
		}
		r.recordOnKustomization(tenant, msg)
		return resync, r.markKustomization(ctx, tenant, msg)
	case err != nil:
		// Not the tenant's doing: what was handed on stays, and the fetch is tried again.
		if serr := r.setStatus(ctx, ea, ea.Status.Artifact, metav1.ConditionFalse, ReasonFetchFailed, err.Error()); serr != nil {
			return ctrl.Result{}, serr
		}
		return ctrl.Result{}, err
	}
	data := sum.data
	rel, err := r.Store.Put(tenant, src.Digest, data)
	if err != nil {
		return ctrl.Result{}, err
	}
	size := int64(len(data))
	artifact := &meta.Artifact{
		Path: rel, URL: r.Store.URL(rel), Revision: src.Revision, Digest: src.Digest,
		LastUpdateTime: metav1.Now(), Size: &size,
	}
	msg := fmt.Sprintf("checked revision %s: %d files, %d manifests, %d bytes", src.Revision, sum.Files, sum.Manifests, sum.Bytes)
	if err := r.setStatus(ctx, ea, artifact, metav1.ConditionTrue, meta.SucceededReason, msg); err != nil {
		return ctrl.Result{}, err
	}
	return resync, r.markKustomization(ctx, tenant, "")
}

// checked is a fetched artifact that passed Check.
type checked struct {
	Summary
	data []byte
}

func (r *Reconciler) check(ctx context.Context, tenant string, src *meta.Artifact) (checked, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	data, err := Fetch(ctx, r.HTTP, src.URL, src.Digest, r.Bounds.ArtifactBytes)
	if err != nil {
		return checked{}, fmt.Errorf("tenant %s: %w", tenant, err)
	}
	sum, err := Check(data, r.Bounds)
	if err != nil && !IsRefused(err) {
		return checked{}, fmt.Errorf("tenant %s: %w", tenant, err)
	}
	return checked{Summary: sum, data: data}, err
}

// refusedAt is the message of a refused revision; with an empty reason, its prefix (the
// revision was refused already).
func refusedAt(revision, reason string) string {
	prefix := "revision " + revision + " refused: "
	if reason == "" {
		return prefix
	}
	return prefix + reason
}

func (r *Reconciler) setStatus(ctx context.Context, ea *sourcev1.ExternalArtifact, artifact *meta.Artifact, status metav1.ConditionStatus, reason, msg string) error {
	ea.Status.Artifact = artifact
	apimeta.SetStatusCondition(&ea.Status.Conditions, metav1.Condition{
		Type: meta.ReadyCondition, Status: status, Reason: reason, Message: msg, ObservedGeneration: ea.Generation,
	})
	if err := r.Client.Status().Update(ctx, ea); err != nil {
		return fmt.Errorf("write the status of the ExternalArtifact of tenant %s: %w", ea.Namespace, err)
	}
	return nil
}

// ConditionSourceRefused is the condition the gate sets on a tenant's Kustomization while the
// last revision of its directory is refused (True, reason ArtifactRefused, the reason in its
// message), beside kustomize-controller's own (Flux's status patches keep the conditions of other
// writers); it goes when a revision is handed on.
const ConditionSourceRefused = "SourceRefused"

// markKustomization sets (refused is the reason) or removes ("") ConditionSourceRefused on the
// tenant's Kustomization, with an optimistic lock so that kustomize-controller's conditions are
// never overwritten.
func (r *Reconciler) markKustomization(ctx context.Context, tenant, refused string) error {
	if r.Direct == nil {
		return nil
	}
	ks := &kustomizev1.Kustomization{}
	if err := r.Direct.Get(ctx, client.ObjectKey{Namespace: tenant, Name: names.TenantKustomization}, ks); err != nil {
		return client.IgnoreNotFound(err)
	}
	orig := ks.DeepCopy()
	if refused == "" {
		if !apimeta.RemoveStatusCondition(&ks.Status.Conditions, ConditionSourceRefused) {
			return nil
		}
	} else if !apimeta.SetStatusCondition(&ks.Status.Conditions, metav1.Condition{
		Type: ConditionSourceRefused, Status: metav1.ConditionTrue, Reason: ReasonRefused, Message: refused, ObservedGeneration: ks.Generation,
	}) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, ks, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("mark the Kustomization of tenant %s: %w", tenant, err)
	}
	return nil
}

// recordOnKustomization tells the tenant, where it looks (kubectl describe kustomization
// workload-clusters), why its directory is not applied.
func (r *Reconciler) recordOnKustomization(tenant, msg string) {
	if r.Events == nil {
		return
	}
	k := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: names.TenantKustomization}}
	k.SetGroupVersionKind(kustomizev1.GroupVersion.WithKind(kustomizev1.KustomizationKind))
	r.Events.Eventf(k, nil, corev1.EventTypeWarning, ReasonRefused, "Check", "%s", msg)
}
