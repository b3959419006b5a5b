// Package clusterdeletion deletes Clusters through Cluster API, which removes their machines and
// infrastructure before the Cluster goes, and waits until they are gone (or given up).
package clusterdeletion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/machines"
)

// Deletion is the deletion of Clusters by Cluster API, which removes their machines and
// infrastructure before the Cluster goes: every command that deletes a cluster goes through it.
type Deletion struct {
	Clusters []client.ObjectKey
	// Timeout bounds the wait for all of them (none if zero: the context's).
	Timeout time.Duration
	// Interval between two looks; 3s if zero.
	Interval time.Duration
	// Progress, if set, is given at each look the clusters still there, as Read sees them.
	Progress func(left []machines.View, elapsed time.Duration)
	// GiveUp, if set, is asked at each look about each cluster still there: a reason not to wait
	// for it any longer ("" to go on waiting). Its answer is logged by the caller.
	GiveUp func(ctx context.Context, cluster client.ObjectKey, elapsed time.Duration) string
}

// Abandoned is a cluster the deletion stopped waiting for, and why.
type Abandoned struct {
	Cluster client.ObjectKey
	Reason  string
}

// Run deletes the Clusters (one already gone is fine) and waits until each is gone or
// given up; it returns those given up. Past the timeout, the error names what is left.
func Run(ctx context.Context, c client.Client, d Deletion) ([]Abandoned, error) {
	for _, k := range d.Clusters {
		cl := &clusterv1.Cluster{}
		cl.Namespace, cl.Name = k.Namespace, k.Name
		if err := c.Delete(ctx, cl); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("delete Cluster %s: %w", k, err)
		}
	}
	interval := d.Interval
	if interval == 0 {
		interval = 3 * time.Second
	}
	start := time.Now()
	waiting := append([]client.ObjectKey(nil), d.Clusters...)
	var abandoned []Abandoned
	var left []machines.View
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		left = left[:0]
		var still []client.ObjectKey
		for _, k := range waiting {
			v, err := machines.Read(ctx, c, k.Namespace, k.Name)
			if err != nil {
				// Read again at the next look: the API may be busy while machines go.
				v = machines.View{Namespace: k.Namespace, Name: k.Name, Found: true, NotTrue: []string{err.Error()}}
			}
			if !v.Found {
				continue
			}
			if d.GiveUp != nil {
				if why := d.GiveUp(ctx, k, time.Since(start)); why != "" {
					abandoned = append(abandoned, Abandoned{Cluster: k, Reason: why})
					continue
				}
			}
			still = append(still, k)
			left = append(left, v)
		}
		waiting = still
		if len(left) > 0 && d.Progress != nil {
			d.Progress(left, time.Since(start))
		}
		return len(left) == 0, nil
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			var names []string
			for _, v := range left {
				names = append(names, fmt.Sprintf("%s/%s (%d machines)", v.Namespace, v.Name, len(v.Machines)))
			}
			return abandoned, fmt.Errorf("clusters still being deleted after %s: %v", time.Since(start).Round(time.Second), names)
		}
		return abandoned, err
	}
	return abandoned, nil
}
