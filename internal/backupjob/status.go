package backupjob

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/names"
)

// Status is what the backup Job keeps of its runs, in ConfigMap names.BackupStatusConfigMap of
// the release's namespace; `bootstrap status` reads it.
type Status struct {
	LastSuccess *Attempt `json:"lastSuccess,omitempty"`
	LastFailure *Attempt `json:"lastFailure,omitempty"`
	// InProgress is a run that started and has not ended: one killed while clusterctl had the
	// clusters paused leaves them paused, and the next run resumes them.
	InProgress *InProgress `json:"inProgress,omitempty"`
}

// Attempt is one run of the Job.
type Attempt struct {
	Reason   string    `json:"reason"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Key and Size: the backup written (a success).
	Key  string `json:"key,omitempty"`
	Size int64  `json:"size,omitempty"`
	// Skipped are the namespaces left out of it, and why.
	Skipped []backup.Namespace `json:"skipped,omitempty"`
	// Message: why it failed.
	Message string `json:"message,omitempty"`
}

// InProgress is a run under way and the clusters it pauses, which were not paused before it.
type InProgress struct {
	Reason  string    `json:"reason"`
	Started time.Time `json:"started"`
	Pauses  []string  `json:"pauses"`
}

const statusKey = "status.json"

// ReadStatus reads the Job's record; a cluster where no backup ran has an empty one.
func ReadStatus(ctx context.Context, c client.Reader, namespace string) (Status, bool, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: names.BackupStatusConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return Status{}, false, nil
	}
	if err != nil {
		return Status{}, false, fmt.Errorf("read the backups' status (ConfigMap %s/%s): %w", namespace, names.BackupStatusConfigMap, err)
	}
	var s Status
	if err := json.Unmarshal([]byte(cm.Data[statusKey]), &s); err != nil {
		return Status{}, true, fmt.Errorf("read the backups' status (ConfigMap %s/%s): %w", namespace, names.BackupStatusConfigMap, err)
	}
	return s, true, nil
}

func writeStatus(ctx context.Context, c client.Client, namespace string, s Status) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names.BackupStatusConfigMap, Labels: names.Labels(false)}}
	err = c.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Data = map[string]string{statusKey: string(data)}
		err = c.Create(ctx, cm)
	case err == nil:
		cm.Data = map[string]string{statusKey: string(data)}
		err = c.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("record the backup's status (ConfigMap %s/%s): %w", namespace, names.BackupStatusConfigMap, err)
	}
	return nil
}

// unpaused are the clusters of namespaces that are not paused now, as namespace/name.
func unpaused(ctx context.Context, c client.Reader, namespaces map[string][]string) ([]string, error) {
	var out []string
	for ns, clusters := range namespaces {
		for _, name := range clusters {
			cl := &clusterv1.Cluster{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
				return nil, fmt.Errorf("read cluster %s/%s: %w", ns, name, err)
			}
			if cl.Spec.Paused == nil || !*cl.Spec.Paused {
				out = append(out, ns+"/"+name)
			}
		}
	}
	return out, nil
}

// resume takes the pause off the clusters a killed run left paused: those it recorded as not
// paused before it. A cluster gone since is skipped.
func resume(ctx context.Context, c client.Client, clusters []string) error {
	for _, nn := range clusters {
		ns, name, ok := strings.Cut(nn, "/")
		if !ok {
			continue
		}
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("resume cluster %s, paused by a backup that did not end: %w", nn, err)
		}
		if cl.Spec.Paused == nil || !*cl.Spec.Paused {
			continue
		}
		patch := client.MergeFrom(cl.DeepCopy())
		cl.Spec.Paused = nil
		if err := c.Patch(ctx, cl, patch); err != nil {
			return fmt.Errorf("resume cluster %s, paused by a backup that did not end: %w", nn, err)
		}
	}
	return nil
}
