package changegate

import (
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/backupjob"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/testenv"
)

const (
	commitA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	commitB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	commitC = "cccccccccccccccccccccccccccccccccccccccc"
	commitD = "dddddddddddddddddddddddddddddddddddddddd"
	commitE = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
)

// A new commit of the platform's repository is released to the release's source only once a
// backup before it completed: on the gate's first run it pins what the platform applies; a new
// commit starts a Job of the backup CronJob's template with reason before-change and stays held
// while it runs; a failed backup keeps it held (status says so), and is tried again once the
// retry's wait is over; a completed one releases it; the annotation releases a commit without a
// backup. Without an incoming source the gate does nothing.
func TestACommitIsReleasedOnlyAfterABackupBeforeIt(t *testing.T) {
	cl := testenv.Start(t, "change-gate")
	c := cl.Client
	ctx := t.Context()
	ns := names.Namespace
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec := events.NewFakeRecorder(20)
	r := &Reconciler{Client: c, Namespace: ns, Events: rec, RetryAfter: 5 * time.Minute, Now: func() time.Time { return now }}
	reconcile := func() ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: names.IncomingSourceRepository}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	released := func() string {
		t.Helper()
		st, _, err := managementstate.Read(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return st.ReleasedCommit
	}
	jobs := func() []batchv1.Job {
		t.Helper()
		var l batchv1.JobList
		if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	fetched := func(name, commit, digest string) {
		t.Helper()
		repo := &sourcev1.GitRepository{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, repo); apierrors.IsNotFound(err) {
			repo = &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: sourcev1.GitRepositorySpec{URL: "http://git.test/cluster-init.git", Interval: metav1.Duration{Duration: time.Minute}, Reference: &sourcev1.GitRepositoryRef{Branch: "main"}}}
			if err := c.Create(ctx, repo); err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		repo.Status.Artifact = &meta.Artifact{Path: "x.tar.gz", URL: "http://source.test/x.tar.gz", Revision: "main@sha1:" + commit, Digest: "sha256:" + strings.Repeat(digest, 64), LastUpdateTime: metav1.NewTime(now)}
		if err := c.Status().Update(ctx, repo); err != nil {
			t.Fatal(err)
		}
	}

	// No incoming source: no gate.
	reconcile()
	if got := released(); got != "" {
		t.Fatalf("released %q without an incoming source", got)
	}

	if err := c.Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.BackupCronJob}, Spec: batchv1.CronJobSpec{
		Schedule: "0 * * * *",
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "backup", Image: "cluster-init/bootstrap:test", Env: []corev1.EnvVar{{Name: backupjob.ReasonEnv, Value: "schedule"}}}},
		}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	// First run: the commit the platform's source applies is released as it is.
	fetched(names.SourceRepository, commitA, "9")
	fetched(names.IncomingSourceRepository, commitA, "a")
	reconcile()
	if got := released(); got != commitA || len(jobs()) != 0 {
		t.Fatalf("first run: released %q, %d Jobs; want %s and none", got, len(jobs()), commitA)
	}

	// A new commit: held, its backup started.
	fetched(names.IncomingSourceRepository, commitB, "b")
	reconcile()
	reconcile()
	if got := released(); got != commitA {
		t.Fatalf("commit B released (%q) before its backup", got)
	}
	js := jobs()
	if len(js) != 1 || js[0].Name != backupjob.BeforeChangeJob(commitB) {
		t.Fatalf("the Jobs: %v", js)
	}
	if env := js[0].Spec.Template.Spec.Containers[0].Env; len(env) != 1 || env[0].Value != backupjob.ReasonBeforeChange {
		t.Errorf("the Job's reason: %v", env)
	}
	view, err := backupjob.Observe(ctx, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if line, _ := view.Summary(now); !strings.Contains(line, "commit bbbbbbbbbbbb held") {
		t.Errorf("status does not show the held commit: %s", line)
	}

	// It fails: held still, and said; tried again once the wait is over.
	job := js[0]
	finish(t, c, &job, batchv1.JobFailed, now)
	reconcile()
	if got := released(); got != commitA {
		t.Fatalf("commit B released (%q) after its backup failed", got)
	}
	if view, err = backupjob.Observe(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	if _, troubles := view.Summary(now); len(troubles) != 1 || !strings.Contains(troubles[0], "failed") || !strings.Contains(troubles[0], names.ReleaseWithoutBackupAnnotation+"="+commitB) {
		t.Errorf("status of a failed backup before the change: %v", troubles)
	}
	if !sawEvent(rec, ReasonBackupBeforeFailed) {
		t.Error("no event says the backup before commit B failed")
	}
	now = now.Add(6 * time.Minute)
	reconcile()
	reconcile()
	js = jobs()
	if len(js) != 1 || js[0].UID == job.UID || released() != commitA {
		t.Fatalf("after the retry's wait: Jobs %d (the failed one still there: %v), released %q", len(js), len(js) == 1 && js[0].UID == job.UID, released())
	}

	// It completes: released.
	job = js[0]
	finish(t, c, &job, batchv1.JobComplete, now)
	reconcile()
	if got := released(); got != commitB {
		t.Fatalf("commit B not released after its backup: %q", got)
	}
	if !sawEvent(rec, ReasonReleased) {
		t.Error("no event says commit B was released")
	}

	// Released without a backup, when asked for that commit.
	fetched(names.IncomingSourceRepository, commitC, "c")
	in := &sourcev1.GitRepository{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.IncomingSourceRepository}, in); err != nil {
		t.Fatal(err)
	}
	in.Annotations = map[string]string{names.ReleaseWithoutBackupAnnotation: commitC}
	if err := c.Update(ctx, in); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if got := released(); got != commitC || len(jobs()) != 1 {
		t.Fatalf("the annotation: released %q with %d Jobs, want %s and no new Job", got, len(jobs()), commitC)
	}

	// A commit of tenants' directories only: the platform's directories keep their digest, and it
	// is released without a backup.
	fetched(names.IncomingSourceRepository, commitD, "c")
	reconcile()
	if got := released(); got != commitD || len(jobs()) != 1 {
		t.Fatalf("a commit that changes none of the platform's directories: released %q with %d Jobs, want %s and no new Job", got, len(jobs()), commitD)
	}
	// One that changes them again waits for its backup.
	fetched(names.IncomingSourceRepository, commitE, "e")
	reconcile()
	if got := released(); got != commitD || len(jobs()) != 2 {
		t.Fatalf("a commit that changes the platform's directories: released %q with %d Jobs, want %s held and its backup started", got, len(jobs()), commitD)
	}
}

// finish sets what the Job controller would: the Job ended as cond.
func finish(t *testing.T, c client.Client, j *batchv1.Job, cond batchv1.JobConditionType, at time.Time) {
	t.Helper()
	start := metav1.NewTime(at.Add(-time.Minute))
	end := metav1.NewTime(at)
	j.Status.StartTime = &start
	conds := []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: end},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: end}}
	if cond == batchv1.JobComplete {
		j.Status.CompletionTime = &end
		j.Status.Succeeded = 1
		conds = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: end},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end}}
	} else {
		j.Status.Failed = 2
	}
	j.Status.Conditions = conds
	if err := c.Status().Update(t.Context(), j); err != nil {
		t.Fatal(err)
	}
}

func sawEvent(rec *events.FakeRecorder, reason string) bool {
	for {
		select {
		case e := <-rec.Events:
			if strings.Contains(e, reason) {
				return true
			}
		default:
			return false
		}
	}
}
