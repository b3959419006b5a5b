package pivot

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/steps"
)

// State is the pivot's record (ConfigMap cluster-init-pivot, key state.json): in the bootstrap
// cluster while it runs, and copied into the management cluster once complete, where it stays.
type State struct {
	// Record holds the steps done (and running), the attempts (its Job restarts the pivot after
	// a failure) and a permanent failure.
	steps.Record
	// ProviderIDs are the machines before the move, name -> provider ID.
	ProviderIDs map[string]string `json:"provider_ids,omitempty"`
	// Completed is set once every step is done and the record is in the management cluster.
	Completed *metav1.Time `json:"completed,omitempty"`
}

// Started tells whether the pivot has done a step: from then on the bootstrap cluster must not
// change (its units that reconcile the definitions may be suspended, the definitions moved). A
// first step that keeps failing (saving the management kubeconfig) changes nothing: a run with a
// corrected checkout may still publish it.
func (s State) Started() bool { return len(s.Done) > 0 }

// CheckComplete fails unless the pivot recorded itself complete, with what it has done so far.
func (s State) CheckComplete() error {
	switch {
	case s.Failed != nil:
		return fmt.Errorf("the pivot failed for good at step %s: %s", s.Failed.Step, s.Failed.Reason)
	case s.Completed == nil:
		return fmt.Errorf("the pivot has not finished (steps done: %v)", s.Done)
	}
	return nil
}

// ReadState reads the pivot's record in a cluster; a pivot that has not started has an empty one.
func ReadState(ctx context.Context, c client.Reader, namespace string) (State, error) {
	var st State
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: names.PivotRecord}, cm)
	if apierrors.IsNotFound(err) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read the pivot's record: %w", err)
	}
	if err := json.Unmarshal([]byte(cm.Data["state.json"]), &st); err != nil {
		return st, fmt.Errorf("the pivot's record (ConfigMap %s/%s): %w", namespace, names.PivotRecord, err)
	}
	return st, nil
}

// writeState writes the record into a cluster.
func writeState(ctx context.Context, c client.Client, namespace string, st State) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names.PivotRecord, Labels: names.Labels(false)},
		Data:       map[string]string{"state.json": string(data)},
	}
	if err := serverSideApply(ctx, c, cm); err != nil {
		return fmt.Errorf("record the pivot's progress: %w", err)
	}
	return nil
}

// configMapStore keeps the record in the cluster the pivot runs in.
type configMapStore struct {
	c         client.Client
	namespace string
}

func (s configMapStore) Load(ctx context.Context) (State, error) {
	return ReadState(ctx, s.c, s.namespace)
}
func (s configMapStore) Save(ctx context.Context, st State) error {
	return writeState(ctx, s.c, s.namespace, st)
}

func serverSideApply(ctx context.Context, c client.Client, obj client.Object) error {
	//nolint:staticcheck // client.Apply with a typed object is the documented server-side apply
	return c.Patch(ctx, obj, client.Apply, client.FieldOwner(names.FieldManager+"-pivot"), client.ForceOwnership)
}
