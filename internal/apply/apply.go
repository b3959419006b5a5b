// Package apply applies object sets to a cluster with server-side apply (fluxcd/pkg/ssa: CRDs
// and namespaces first, then the rest) and waits for them with kstatus, reporting what is still
// pending while it waits.
package apply

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
)

// FieldManager is the server-side apply field manager of everything the CLI applies.
const FieldManager = "cluster-init"

// Applier applies to one cluster.
type Applier struct {
	cluster *kube.Cluster
	rm      *ssa.ResourceManager
}

// New returns an applier for c.
func New(c *kube.Cluster) *Applier {
	poller := polling.NewStatusPoller(c.Client, c.Mapper, polling.Options{})
	rm := ssa.NewResourceManager(c.Client, poller, ssa.Owner{Field: FieldManager, Group: "cluster-init.dev"})
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

// Pending is an object that is not ready yet.
type Pending struct {
	Object  string // Kind/namespace/name
	Status  status.Status
	Message string
}

// Wait polls objs until kstatus sees all of them Current, calling report with what is still
// pending after each poll. It fails when one of them fails, or at the timeout.
func (a *Applier) Wait(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration, report func([]Pending)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var pending []Pending
	for {
		pending = pending[:0]
		var failed []string
		for _, o := range objs {
			p, err := a.state(ctx, o)
			if err != nil {
				return err
			}
			if p == nil {
				continue
			}
			pending = append(pending, *p)
			if p.Status == status.FailedStatus {
				failed = append(failed, fmt.Sprintf("%s: %s", p.Object, p.Message))
			}
		}
		if report != nil {
			report(pending)
		}
		if len(pending) == 0 {
			return nil
		}
		if len(failed) > 0 {
			return fmt.Errorf("%s cluster: failed: %s", a.cluster.Name, strings.Join(failed, "; "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s cluster: still not ready after %s: %s", a.cluster.Name, timeout, describe(pending))
		case <-tick.C:
		}
	}
}

func describe(pending []Pending) string {
	parts := make([]string, 0, len(pending))
	for _, p := range pending {
		parts = append(parts, fmt.Sprintf("%s (%s: %s)", p.Object, p.Status, p.Message))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// state returns nil when the object is Current.
func (a *Applier) state(ctx context.Context, want *unstructured.Unstructured) (*Pending, error) {
	name := utils.FmtUnstructured(want)
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(want.GroupVersionKind())
	err := a.cluster.Client.Get(ctx, client.ObjectKeyFromObject(want), got)
	if apierrors.IsNotFound(err) {
		return &Pending{Object: name, Status: status.NotFoundStatus, Message: "not found"}, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return &Pending{Object: name, Status: status.UnknownStatus, Message: err.Error()}, nil
		}
		return nil, fmt.Errorf("%s cluster: get %s: %w", a.cluster.Name, name, err)
	}
	res, err := status.Compute(got)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: status of %s: %w", a.cluster.Name, name, err)
	}
	if res.Status == status.CurrentStatus {
		return nil, nil
	}
	return &Pending{Object: name, Status: res.Status, Message: res.Message}, nil
}
