package backupjob

import (
	"context"
	"fmt"
	"strings"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
)

// ReasonBeforeChange is the reason of a backup taken before a change: by `bootstrap apply`, or by
// the change gate before it releases a commit (internal/changegate).
const ReasonBeforeChange = backup.ReasonBeforeChange

// BeforeChangeRetry is how long after a failed backup before a change the gate tries again.
const BeforeChangeRetry = 5 * time.Minute

// CommitOf is the commit of a GitRepository's artifact revision ("main@sha1:<commit>",
// "sha1:<commit>"), "" for another form.
func CommitOf(revision string) string {
	_, digest, _ := strings.Cut(revision, "@")
	if digest == "" {
		digest = revision
	}
	for _, algo := range []string{"sha1:", "sha256:"} {
		if c, ok := strings.CutPrefix(digest, algo); ok {
			return c
		}
	}
	return ""
}

// BeforeChangeJob is the name of the Job of the backup before commit: one per commit.
func BeforeChangeJob(commit string) string {
	return fmt.Sprintf("%s-%s-%.12s", names.BackupCronJob, ReasonBeforeChange, commit)
}

// JobOutcome is what a Job came to: running (neither), complete, or failed and when, with why.
type JobOutcome struct {
	Complete, Failed bool
	FailedAt         time.Time
	Message          string
}

// OutcomeOf reads a Job's conditions.
func OutcomeOf(j *batchv1.Job) JobOutcome {
	for _, cond := range j.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			return JobOutcome{Complete: true}
		case batchv1.JobFailed:
			return JobOutcome{Failed: true, FailedAt: cond.LastTransitionTime.Time, Message: strings.TrimSpace(cond.Reason + ": " + cond.Message)}
		}
	}
	return JobOutcome{}
}

// Held is a commit of the platform's repository the change gate holds until a backup before it
// is written.
type Held struct {
	Commit string
	// Since is when source-controller fetched it.
	Since time.Time
	// Job is the backup's, "" before the gate started it; Outcome what it came to.
	Job     string
	Outcome JobOutcome
}

// ObserveHeld reads what the change gate holds in namespace: nil where no gate runs (no incoming
// source) or nothing is held.
func ObserveHeld(ctx context.Context, c client.Reader, namespace string) (*Held, error) {
	in := &sourcev1.GitRepository{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: names.IncomingSourceRepository}, in); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read GitRepository %s/%s: %w", namespace, names.IncomingSourceRepository, err)
	}
	if in.Status.Artifact == nil {
		return nil, nil
	}
	commit := CommitOf(in.Status.Artifact.Revision)
	st, _, err := managementstate.Read(ctx, c)
	if err != nil {
		return nil, err
	}
	if commit == "" || st.ReleasedCommit == "" || commit == st.ReleasedCommit {
		return nil, nil
	}
	h := &Held{Commit: commit, Since: in.Status.Artifact.LastUpdateTime.Time}
	j := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: BeforeChangeJob(commit)}, j); err == nil {
		h.Job, h.Outcome = j.Name, OutcomeOf(j)
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read the backup Job before commit %.12s: %w", commit, err)
	}
	return h, nil
}
