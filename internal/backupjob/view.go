package backupjob

import (
	"context"
	"fmt"
	"time"

	"github.com/dustin/go-humanize"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/names"
)

// View is what `bootstrap status` shows of the backups: the CronJob and the record of its runs.
type View struct {
	// Found: the backup unit runs here (its CronJob exists).
	Found     bool
	Schedule  string
	Suspended bool
	Running   int
	Status    Status
	// Held is the commit the change gate holds for its backup, if any.
	Held *Held
}

// Observe reads the backups' view of the cluster; a cluster without the unit has an empty one.
func Observe(ctx context.Context, c client.Reader, namespace string) (View, error) {
	cj := &batchv1.CronJob{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: names.BackupCronJob}, cj)
	if apierrors.IsNotFound(err) {
		return View{}, nil
	}
	if err != nil {
		return View{}, fmt.Errorf("read the backup CronJob %s/%s: %w", namespace, names.BackupCronJob, err)
	}
	v := View{Found: true, Schedule: cj.Spec.Schedule, Suspended: cj.Spec.Suspend != nil && *cj.Spec.Suspend, Running: len(cj.Status.Active)}
	if v.Status, _, err = ReadStatus(ctx, c, namespace); err != nil {
		return v, err
	}
	v.Held, err = ObserveHeld(ctx, c, namespace)
	return v, err
}

// Summary is the view in a line, and what is wrong, one line each: a failure since the last
// success, a last backup older than twice the schedule's period, namespaces it left out.
func (v View) Summary(now time.Time) (string, []string) {
	if !v.Found {
		return "", nil
	}
	line := "backups: " + v.Schedule
	if v.Suspended {
		line += " (suspended)"
	}
	var troubles []string
	s := v.Status
	if last := s.LastSuccess; last != nil {
		line += fmt.Sprintf("; last %s, %s, %s ago", last.Key, humanize.IBytes(uint64(max(last.Size, 0))), now.Sub(last.Finished).Round(time.Second))
		if stale, period := Stale(v.Schedule, last.Finished, now); stale {
			troubles = append(troubles, fmt.Sprintf("the last backup is older than twice the schedule's period (%s)", period))
		}
		for _, ns := range last.Skipped {
			troubles = append(troubles, fmt.Sprintf("namespace %s is not in the last backup: %s", ns.Name, ns.Skipped))
		}
	} else {
		line += "; no backup written yet"
	}
	if f := s.LastFailure; f != nil && (s.LastSuccess == nil || f.Finished.After(s.LastSuccess.Finished)) {
		troubles = append(troubles, fmt.Sprintf("failed %s ago (%s): %s", now.Sub(f.Finished).Round(time.Second), f.Reason, f.Message))
	}
	if v.Running > 0 {
		line += fmt.Sprintf("; %d running", v.Running)
	}
	if h := v.Held; h != nil {
		held := fmt.Sprintf("commit %.12s held %s for the backup before it", h.Commit, now.Sub(h.Since).Round(time.Second))
		switch {
		case h.Outcome.Failed:
			troubles = append(troubles, fmt.Sprintf("%s: Job %s failed (%s); tried again %s after it failed, or: kubectl -n %s annotate gitrepository %s %s=%s", held, h.Job, h.Outcome.Message, BeforeChangeRetry, names.Namespace, names.IncomingSourceRepository, names.ReleaseWithoutBackupAnnotation, h.Commit))
		case h.Job != "":
			line += "; " + held + " (Job " + h.Job + ")"
		default:
			line += "; " + held
		}
	}
	return line, troubles
}
