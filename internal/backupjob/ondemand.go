package backupjob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
)

// ReasonEnv is the environment variable of the Job's container that says why it runs; the
// CronJob's template says the schedule.
const ReasonEnv = "CLUSTER_INIT_BACKUP_REASON"

// ErrNoBackupUnit: the cluster runs no backup unit (its CronJob is not there).
var ErrNoBackupUnit = errors.New("no backup unit")

// Start creates a Job of the backup CronJob's template, as `kubectl create job --from=cronjob`
// does, with reason in place of the schedule, and returns its name. A cluster without the
// CronJob is told how to get one.
func Start(ctx context.Context, c client.Client, namespace, reason string, now time.Time) (string, error) {
	return StartNamed(ctx, c, namespace, reason, fmt.Sprintf("%s-%s-%s", names.BackupCronJob, reason, now.UTC().Format("20060102t150405")))
}

// StartNamed is Start with the Job's name given: the change gate names the backup before a commit
// after the commit (BeforeChangeJob), so that it finds the Job again after a restart.
func StartNamed(ctx context.Context, c client.Client, namespace, reason, name string) (string, error) {
	cj := &batchv1.CronJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: names.BackupCronJob}, cj); apierrors.IsNotFound(err) {
		return "", fmt.Errorf("%w: no CronJob %s/%s in this cluster: set backup.enabled (and backup.store, backup.recipients, credentials.backup) in the environment's values, then apply them", ErrNoBackupUnit, namespace, names.BackupCronJob)
	} else if err != nil {
		return "", fmt.Errorf("read the backup CronJob %s/%s: %w", namespace, names.BackupCronJob, err)
	}
	spec := cj.Spec.JobTemplate.Spec.DeepCopy()
	for i := range spec.Template.Spec.Containers {
		setEnv(&spec.Template.Spec.Containers[i], ReasonEnv, reason)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   namespace,
			Name:        name,
			Labels:      cj.Spec.JobTemplate.Labels,
			Annotations: map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: *spec,
	}
	if err := c.Create(ctx, job); err != nil {
		return "", fmt.Errorf("start a backup (Job %s/%s): %w", namespace, job.Name, err)
	}
	return job.Name, nil
}

func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i] = corev1.EnvVar{Name: name, Value: value}
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

// Wait follows the Job until it completes or fails, calling waiting with what it waits for when
// that changes, and returns the status the Job recorded. A Job that failed before it recorded
// anything says why in the last lines of its pod's log.
func Wait(ctx context.Context, c *kube.Cluster, namespace, job string, waiting func(string)) (Status, error) {
	var failed, last string
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		j := &batchv1.Job{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: job}, j); err != nil {
			waiting(fmt.Sprintf("Job %s: %v", job, err))
			return false, nil
		}
		if o := OutcomeOf(j); o.Complete || o.Failed {
			failed = o.Message
			return true, nil
		}
		if now := fmt.Sprintf("Job %s: %d running, %d failed", job, j.Status.Active, j.Status.Failed); now != last {
			last = now
			waiting(now)
		}
		return false, nil
	})
	if err != nil {
		return Status{}, fmt.Errorf("wait for the backup Job %s/%s: %w", namespace, job, err)
	}
	st, _, err := ReadStatus(ctx, c.Client, namespace)
	if err != nil {
		return st, err
	}
	if failed != "" {
		msg := failed
		if st.LastFailure != nil && st.InProgress == nil && (st.LastSuccess == nil || st.LastFailure.Finished.After(st.LastSuccess.Finished)) {
			msg = st.LastFailure.Message
		} else if log := lastLogLines(ctx, c, namespace, job); log != "" {
			msg += "; its log ends:\n" + log
		}
		return st, fmt.Errorf("the backup Job %s/%s failed: %s", namespace, job, msg)
	}
	return st, nil
}

// lastLogLines are the last lines of the log of the Job's newest pod, or "" when there is none.
func lastLogLines(ctx context.Context, c *kube.Cluster, namespace, job string) string {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return ""
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(pods.Items) == 0 {
		return ""
	}
	newest := pods.Items[0]
	for _, p := range pods.Items {
		if p.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = p
		}
	}
	data, err := cs.CoreV1().Pods(namespace).GetLogs(newest.Name, &corev1.PodLogOptions{TailLines: ptr.To(int64(10)), LimitBytes: ptr.To(int64(8 << 10))}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
