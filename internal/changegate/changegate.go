// Package changegate holds each new commit of the platform's repository until a backup of the
// management cluster before it is written, then releases it to the units.
//
// Every unit of the checkout, and the release itself, reads one source (GitRepository
// names.SourceRepository): a commit reaches them all at once, and nothing in Flux runs before it.
// Where the gate runs (the backup unit, with backup.before_change) the chart pins that source to
// the commit the gate released (managementstate.State.ReleasedCommit) and renders a second one,
// names.IncomingSourceRepository, that follows the branch. When the incoming one fetches a
// commit, the gate starts a backup (reason before-change, a Job of the backup CronJob's
// template) and, once it completed, records the commit as released: helm-controller upgrades the
// release on that change of its state layer, which moves the pin. A backup that fails holds the
// commit: Warning events on the incoming source say why, `bootstrap status` shows it, the gate
// tries again after backupjob.BeforeChangeRetry, and an annotation
// (names.ReleaseWithoutBackupAnnotation set to the commit) releases it without one. Commits that
// arrive while a backup runs are released together: none of them was applied before it. The
// incoming source's artifact holds the platform's directories alone: a commit that keeps its
// digest changes only tenants' directories, which the tenants' own sources follow without the
// gate, and is released without a backup.
package changegate

import (
	"context"
	"fmt"
	"strings"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"cluster-init.dev/cluster-init/internal/backupjob"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
)

// Event reasons, on the incoming source.
const (
	ReasonPinned             = "Pinned"
	ReasonBackupBeforeChange = "BackupBeforeChange"
	ReasonReleased           = "ChangeReleased"
	ReasonReleasedNoBackup   = "ReleasedWithoutBackup"
	ReasonBackupBeforeFailed = "BackupBeforeChangeFailed"
	fieldOwner               = names.FieldManager + "-change-gate"
	lookAgain                = 10 * time.Second
)

// Reconciler is the gate of the platform's namespace.
type Reconciler struct {
	Client    client.Client
	Namespace string
	// Events, if set, records what the gate does on the incoming source.
	Events events.EventRecorder
	// RetryAfter is how long after a failed backup a new one starts (backupjob.BeforeChangeRetry).
	RetryAfter time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
}

// SetupWithManager watches the incoming source, and the Jobs of the backups before a change.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	incoming := types.NamespacedName{Namespace: r.Namespace, Name: names.IncomingSourceRepository}
	return ctrl.NewControllerManagedBy(mgr).
		Named("change-gate").
		For(&sourcev1.GitRepository{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == incoming.Namespace && o.GetName() == incoming.Name
		}))).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if o.GetNamespace() != r.Namespace || !strings.HasPrefix(o.GetName(), backupjob.BeforeChangeJob("")) {
				return nil
			}
			return []reconcile.Request{{NamespacedName: incoming}}
		})).
		Complete(r)
}

// Reconcile releases the incoming source's commit once a backup before it completed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Namespace != r.Namespace || req.Name != names.IncomingSourceRepository {
		return ctrl.Result{}, nil
	}
	in := &sourcev1.GitRepository{}
	if err := r.Client.Get(ctx, req.NamespacedName, in); apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil // no gate here: the chart renders the incoming source where one runs
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("read the incoming source %s: %w", req.NamespacedName, err)
	}
	if in.Status.Artifact == nil {
		return ctrl.Result{}, nil // nothing fetched yet: source-controller's status says why
	}
	commit := backupjob.CommitOf(in.Status.Artifact.Revision)
	if commit == "" {
		return ctrl.Result{}, fmt.Errorf("the incoming source %s: revision %q names no commit", req.NamespacedName, in.Status.Artifact.Revision)
	}
	st, _, err := managementstate.Read(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	digest := in.Status.Artifact.Digest
	if st.ReleasedCommit == "" {
		if err := r.pinFirst(ctx, in, commit, digest); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if commit == st.ReleasedCommit {
		return ctrl.Result{}, nil
	}
	if digest != "" && digest == st.ReleasedDigest {
		// The platform's directories are as released: a commit of tenants' directories only,
		// which reach the tenants without the gate.
		if err := r.release(ctx, commit, digest); err != nil {
			return ctrl.Result{}, err
		}
		r.event(in, corev1.EventTypeNormal, ReasonReleased, "commit %s released: it changes none of the platform's directories", commit)
		return ctrl.Result{}, nil
	}
	if in.Annotations[names.ReleaseWithoutBackupAnnotation] == commit {
		if err := r.release(ctx, commit, digest); err != nil {
			return ctrl.Result{}, err
		}
		r.event(in, corev1.EventTypeWarning, ReasonReleasedNoBackup, "commit %s released without a backup before it (annotation %s)", commit, names.ReleaseWithoutBackupAnnotation)
		return ctrl.Result{}, nil
	}

	return r.backupThenRelease(ctx, in, commit, digest)
}

// pinFirst is the gate's first run: what the release applies now is released already.
func (r *Reconciler) pinFirst(ctx context.Context, in *sourcev1.GitRepository, commit, digest string) error {
	pinned, pinnedDigest := commit, digest
	src := &sourcev1.GitRepository{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: names.SourceRepository}, src); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read the platform's source %s/%s: %w", r.Namespace, names.SourceRepository, err)
	} else if err == nil && src.Status.Artifact != nil {
		if c := backupjob.CommitOf(src.Status.Artifact.Revision); c != "" && c != commit {
			pinned, pinnedDigest = c, "" // the platform's directories at c are not known: the next commit gets a backup
		}
	}
	if err := r.release(ctx, pinned, pinnedDigest); err != nil {
		return err
	}
	r.event(in, corev1.EventTypeNormal, ReasonPinned, "the platform's source is pinned to commit %s, which it applies; each new commit waits for a backup before it", pinned)
	return nil
}

// backupThenRelease starts the backup before commit, and releases commit once it completed.
func (r *Reconciler) backupThenRelease(ctx context.Context, in *sourcev1.GitRepository, commit, digest string) (ctrl.Result, error) {
	name := backupjob.BeforeChangeJob(commit)
	job := &batchv1.Job{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, job); apierrors.IsNotFound(err) {
		if _, err := backupjob.StartNamed(ctx, r.Client, r.Namespace, backupjob.ReasonBeforeChange, name); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, err
		}
		r.event(in, corev1.EventTypeNormal, ReasonBackupBeforeChange, "commit %s is held until a backup of the management cluster is written (Job %s)", commit, name)
		return ctrl.Result{RequeueAfter: lookAgain}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("read the backup Job %s/%s: %w", r.Namespace, name, err)
	}
	switch o := backupjob.OutcomeOf(job); {
	case o.Complete:
		if err := r.release(ctx, commit, digest); err != nil {
			return ctrl.Result{}, err
		}
		r.event(in, corev1.EventTypeNormal, ReasonReleased, "commit %s released: the backup before it is written (Job %s)", commit, name)
		return ctrl.Result{}, nil
	case o.Failed:
		again := o.FailedAt.Add(r.RetryAfter)
		if wait := again.Sub(r.now()); wait > 0 {
			r.event(in, corev1.EventTypeWarning, ReasonBackupBeforeFailed, "commit %s stays held: the backup before it failed (Job %s: %s); tried again at %s", commit, name, o.Message, again.UTC().Format(time.RFC3339))
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		// The next try: the failed Job makes way for a new one of the same name.
		if err := r.Client.Delete(ctx, job, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete the failed backup Job %s/%s: %w", r.Namespace, name, err)
		}
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{RequeueAfter: lookAgain}, nil
}

// release records commit as released, with the digest of the platform's directories at it: the
// release's state layer, which helm-controller watches.
func (r *Reconciler) release(ctx context.Context, commit, digest string) error {
	if err := managementstate.Update(ctx, r.Client, fieldOwner, func(st *managementstate.State) {
		st.ReleasedCommit, st.ReleasedDigest = commit, digest
	}); err != nil {
		return fmt.Errorf("release commit %s: %w", commit, err)
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) event(in *sourcev1.GitRepository, typ, reason, format string, args ...any) {
	if r.Events == nil {
		return
	}
	r.Events.Eventf(in, nil, typ, reason, "Gate", format, args...)
}
