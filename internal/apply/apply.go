// Package apply applies object sets to a cluster with server-side apply (fluxcd/pkg/ssa: CRDs
// and namespaces first, then the rest). Waiting for them is internal/readiness.
package apply

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
)

// Applier applies to one cluster.
type Applier struct {
	cluster *kube.Cluster
	rm      *ssa.ResourceManager
}

// New returns an applier for c.
func New(c *kube.Cluster) *Applier {
	poller := polling.NewStatusPoller(c.Client, c.Mapper, polling.Options{})
	rm := ssa.NewResourceManager(c.Client, poller, ssa.Owner{Field: names.FieldManager, Group: "cluster-init.dev"})
	rm.SetConcurrency(4)
	return &Applier{cluster: c, rm: rm}
}

// Apply applies objs, staged so that CRDs and namespaces exist before what uses them. The change
// set says what was created, configured or left unchanged.
func (a *Applier) Apply(ctx context.Context, objs []*unstructured.Unstructured) (*ssa.ChangeSet, error) {
	opts := ssa.DefaultApplyOptions()
	opts.WaitTimeout = 2 * time.Minute
	cs, err := a.rm.ApplyAllStaged(ctx, copies(objs), opts)
	if err != nil {
		return cs, fmt.Errorf("apply to the %s cluster: %w", a.cluster.Name, err)
	}
	return cs, nil
}

func copies(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}

// Delete deletes objs (what was applied with Apply: dependents before CRDs and namespaces) and
// waits until they are gone, or timeout.
func (a *Applier) Delete(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) (*ssa.ChangeSet, error) {
	cs, err := a.rm.DeleteAll(ctx, copies(objs), ssa.DefaultDeleteOptions())
	if err != nil {
		return cs, fmt.Errorf("delete from the %s cluster: %w", a.cluster.Name, err)
	}
	if err := a.rm.WaitForSetTermination(cs, ssa.WaitOptions{Interval: 2 * time.Second, Timeout: timeout}); err != nil {
		return cs, fmt.Errorf("wait for the deletion from the %s cluster: %w", a.cluster.Name, err)
	}
	return cs, nil
}
