// Package managementstate is the state of a management cluster, kept in the cluster itself as the
// last values layer of its cluster-init release (ConfigMap names.StateConfigMap): self_managed
// once the pivot has moved its definitions in, adopted when the cluster existed before
// cluster-init, hold_tenants while a restore brings a backup's clusters in (the tenants' directories
// are not reconciled until they are: a cluster made from git first would be a second one),
// released_commit where the change gate holds each commit until a backup is written. The
// CLI reads it to render what the cluster renders.
package managementstate

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/values"
)

// State is what the state ConfigMap says.
type State struct {
	SelfManaged bool `json:"self_managed"`
	Adopted     bool `json:"adopted"`
	// HoldTenants: a restore (`bootstrap restore`) is taking a backup's clusters into this
	// cluster; the tenants' Kustomizations stay suspended until it releases them.
	HoldTenants bool `json:"hold_tenants,omitempty"`
	// ReleasedCommit is the commit of the platform's repository the change gate released
	// (internal/changegate): the release pins its source to it while the gate runs.
	ReleasedCommit string `json:"released_commit,omitempty"`
	// ReleasedDigest is the digest of the incoming source's artifact of ReleasedCommit (the
	// platform's directories alone): a commit whose artifact has the same one changes nothing the
	// platform applies, and is released without a backup.
	ReleasedDigest string `json:"released_digest,omitempty"`
}

// Managed: the cluster is a management cluster (self-managed or adopted), not one still being
// bootstrapped.
func (s State) Managed() bool { return s.SelfManaged || s.Adopted }

// String says what the cluster is, as messages name it.
func (s State) String() string {
	switch {
	case s.Adopted:
		return "adopted"
	case s.SelfManaged && s.HoldTenants:
		return "self-managed, its tenants held for a restore"
	case s.SelfManaged:
		return "self-managed"
	}
	return "not a management cluster yet"
}

// Layer is the state as the values layer the release reads.
func (s State) Layer() values.Layer {
	m := map[string]any{}
	if s.SelfManaged {
		m["self_managed"] = true
	}
	if s.Adopted {
		m["adopted"] = true
	}
	if s.HoldTenants {
		m["hold_tenants"] = true
	}
	if s.ReleasedCommit != "" {
		m["released_commit"] = s.ReleasedCommit
	}
	if s.ReleasedDigest != "" {
		m["released_digest"] = s.ReleasedDigest
	}
	return values.FromMap("(state of the management cluster, ConfigMap "+names.Namespace+"/"+names.StateConfigMap+")", m)
}

// Read reads the state of the cluster; found is false when it has none (no pivot finished, not
// adopted).
func Read(ctx context.Context, c client.Reader) (st State, found bool, err error) {
	cm := &corev1.ConfigMap{}
	err = c.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: names.StateConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("read the state of the management cluster (ConfigMap %s/%s): %w", names.Namespace, names.StateConfigMap, err)
	}
	if err := yaml.Unmarshal([]byte(cm.Data[names.ValuesKey]), &st); err != nil {
		return st, true, fmt.Errorf("the state of the management cluster (ConfigMap %s/%s): %w", names.Namespace, names.StateConfigMap, err)
	}
	return st, true, nil
}

// Write records the state in the cluster (server-side apply as owner); helm-controller upgrades
// the release when it changes (the ConfigMap is watched). It replaces the whole state: a writer
// that changes one field of a state others write too (the change gate, a restore) uses Update.
func Write(ctx context.Context, c client.Client, owner string, st State) error {
	return apply(ctx, c, owner, st, "")
}

// Update changes the state in the cluster with mutate, read and written again on a conflict: the
// CLI (a restore, the pivot) and the change gate write the one ConfigMap, each its own fields, and
// neither may put back what the other just changed.
func Update(ctx context.Context, c client.Client, owner string, mutate func(*State)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: names.StateConfigMap}, cm)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("read the state of the management cluster (ConfigMap %s/%s): %w", names.Namespace, names.StateConfigMap, err)
		}
		var st State
		if err == nil {
			if err := yaml.Unmarshal([]byte(cm.Data[names.ValuesKey]), &st); err != nil {
				return fmt.Errorf("the state of the management cluster (ConfigMap %s/%s): %w", names.Namespace, names.StateConfigMap, err)
			}
		}
		mutate(&st)
		// The version read is the apply's precondition: a write in between is a conflict, and
		// the state is read again.
		return apply(ctx, c, owner, st, cm.ResourceVersion)
	})
}

func apply(ctx context.Context, c client.Client, owner string, st State, resourceVersion string) error {
	data, err := yaml.Marshal(st.Layer().Data)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: names.StateConfigMap, Labels: names.Labels(true), ResourceVersion: resourceVersion},
		Data:       map[string]string{names.ValuesKey: string(data)},
	}
	//nolint:staticcheck // client.Apply with a typed object is the documented server-side apply
	if err := c.Patch(ctx, cm, client.Apply, client.FieldOwner(owner), client.ForceOwnership); err != nil {
		if apierrors.IsConflict(err) {
			return err // Update reads again
		}
		return fmt.Errorf("record the state of the management cluster (ConfigMap %s/%s): %w", names.Namespace, names.StateConfigMap, err)
	}
	return nil
}
