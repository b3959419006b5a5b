package backupjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/robfig/cron/v3"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/kube"
)

// Notifier sends what a run found to Flux's notification-controller, whose Alert of the platform
// forwards errors to the team.
type Notifier interface {
	Notify(ctx context.Context, severity, reason, message string)
}

// Event reasons the Job reports.
const (
	ReasonFailed    = "BackupFailed"
	ReasonStale     = "BackupStale"
	ReasonPartial   = "BackupPartial"
	ReasonSucceeded = "BackupSucceeded"
)

// RunOptions are a run of the Job.
type RunOptions struct {
	Namespace string
	Config    Config
	// StoreKeys is the directory of the store's keys.
	StoreKeys string
	Reason    string
	Version   string
	WorkDir   string
	Notifier  Notifier
	Now       func() time.Time
}

// Run is the backup Job: it resumes the clusters a killed run left paused, says when the last
// backup is older than twice the schedule's period, takes the backup, and records how it went in
// the status ConfigMap; a failure is also notified.
func Run(ctx context.Context, c *kube.Cluster, o RunOptions) (Result, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if !slices.Contains([]string{backup.ReasonSchedule, backup.ReasonBeforeChange, backup.ReasonOnDemand}, o.Reason) {
		return Result{}, fmt.Errorf("reason %q: expected %s, %s or %s", o.Reason, backup.ReasonSchedule, backup.ReasonBeforeChange, backup.ReasonOnDemand)
	}
	var res Result
	err := exclusively(ctx, c, o.Namespace, func(ctx context.Context) (err error) {
		res, err = o.run(ctx, c)
		return err
	})
	return res, err
}

// run is Run holding the lock.
func (o RunOptions) run(ctx context.Context, c *kube.Cluster) (Result, error) {
	st, _, err := ReadStatus(ctx, c.Client, o.Namespace)
	if err != nil {
		return Result{}, err
	}
	if st.InProgress != nil {
		if err := resume(ctx, c.Client, st.InProgress.Pauses); err != nil {
			return Result{}, err
		}
	}
	started := o.Now()
	if st.LastSuccess != nil {
		if stale, period := Stale(o.Config.Backup.Schedule, st.LastSuccess.Finished, started); stale {
			o.Notifier.Notify(ctx, "error", ReasonStale, fmt.Sprintf("the last backup of %s (%s) was written %s ago, more than twice the schedule's period (%s)",
				o.Config.Environment, st.LastSuccess.Key, started.Sub(st.LastSuccess.Finished).Round(time.Minute), period))
		}
	}
	res, err := o.take(ctx, c, &st, started)
	st.InProgress = nil
	run := &Attempt{Reason: o.Reason, Started: started.UTC(), Finished: o.Now().UTC()}
	if err != nil {
		run.Message = err.Error()
		st.LastFailure = run
	} else {
		run.Key, run.Size, run.Skipped = res.Entry.Key, res.Entry.Size, res.Skipped
		st.LastSuccess = run
	}
	if werr := writeStatus(ctx, c.Client, o.Namespace, st); werr != nil {
		err = errors.Join(err, werr)
	}
	if err != nil {
		o.Notifier.Notify(ctx, "error", ReasonFailed, fmt.Sprintf("backup of %s failed: %v", o.Config.Environment, err))
		return res, err
	}
	for _, ns := range res.Skipped {
		o.Notifier.Notify(ctx, "error", ReasonPartial, fmt.Sprintf("backup %s holds nothing of namespace %s: %s (the next backup tries again)", res.Entry.Key, ns.Name, ns.Skipped))
	}
	o.Notifier.Notify(ctx, "info", ReasonSucceeded, fmt.Sprintf("backup %s written (%d bytes)", res.Entry.Key, res.Entry.Size))
	return res, nil
}

// take records the clusters it will pause, then takes the backup.
func (o RunOptions) take(ctx context.Context, c *kube.Cluster, st *Status, started time.Time) (Result, error) {
	recipients, err := o.Config.ParsedRecipients()
	if err != nil {
		return Result{}, err
	}
	store, err := o.Config.OpenStore(o.StoreKeys)
	if err != nil {
		return Result{}, err
	}
	namespaces, err := clusterNamespaces(ctx, c.Client)
	if err != nil {
		return Result{}, err
	}
	pauses, err := unpaused(ctx, c.Client, namespaces)
	if err != nil {
		return Result{}, err
	}
	st.InProgress = &InProgress{Reason: o.Reason, Started: started.UTC(), Pauses: pauses}
	if err := writeStatus(ctx, c.Client, o.Namespace, *st); err != nil {
		return Result{}, err
	}
	return Take(ctx, c, Options{Environment: o.Config.Environment, Cluster: o.Config.Cluster, Reason: o.Reason, Version: o.Version,
		Store: store, Recipients: recipients, Retention: o.Config.RetentionRule(), WorkDir: o.WorkDir, Now: o.Now})
}

// Stale says whether a backup finished at last is older than twice the period of schedule (a
// cron schedule, as the CronJob reads it) at now, and that period. A schedule that does not parse
// is never stale here: the CronJob refuses it, and says so.
func Stale(schedule string, last, now time.Time) (bool, time.Duration) {
	sched, err := cron.ParseStandard(schedule)
	if err != nil {
		return false, 0
	}
	next := sched.Next(last)
	period := sched.Next(next).Sub(next)
	return now.Sub(last) > 2*period, period
}
