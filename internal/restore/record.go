package restore

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/names"
)

// recordKey is the key of the record in its ConfigMap.
const recordKey = "state.json"

// ReadRecord reads the restore's record of the management cluster; found is false when no
// restore ever ran there.
func ReadRecord(ctx context.Context, c client.Reader) (rec Record, found bool, err error) {
	cm := &corev1.ConfigMap{}
	err = c.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: names.RestoreRecord}, cm)
	if apierrors.IsNotFound(err) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("read the restore's record: %w", err)
	}
	if err := json.Unmarshal([]byte(cm.Data[recordKey]), &rec); err != nil {
		return rec, true, fmt.Errorf("the restore's record (ConfigMap %s/%s): %w", names.Namespace, names.RestoreRecord, err)
	}
	return rec, true, nil
}

// WriteRecord writes the record into the management cluster (server-side apply as its owner).
func WriteRecord(ctx context.Context, c client.Client, rec Record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: names.RestoreRecord, Labels: names.Labels(false)},
		Data:       map[string]string{recordKey: string(data)},
	}
	//nolint:staticcheck // client.Apply with a typed object is the documented server-side apply
	if err := c.Patch(ctx, cm, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("record the restore's progress: %w", err)
	}
	return nil
}

// fieldOwner is the field manager of what a restore writes.
const fieldOwner = names.FieldManager + "-restore"
