package clusterdeletion_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"cluster-init.dev/cluster-init/internal/clusterdeletion"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/testenv"
)

const ns = "default"

// The one deletion of Clusters, on a real API server where a finalizer plays Cluster API: it
// waits while a Cluster is there, reports what is left, ends when every one is gone, stops
// waiting for one it is told to give up, and past its timeout names what is left.
func TestDeleteClustersWaitsUntilEachIsGoneOrGivenUp(t *testing.T) {
	c := testenv.Start(t, "test").Client
	ctx := t.Context()
	const finalizer = "cluster.cluster.x-k8s.io"
	create := func(name string) client.ObjectKey {
		cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{finalizer}},
			Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: name}}}
		if err := c.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		return client.ObjectKeyFromObject(cl)
	}
	release := func(k client.ObjectKey) {
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, k, cl); err != nil {
			t.Error(err)
			return
		}
		controllerutil.RemoveFinalizer(cl, finalizer)
		if err := c.Update(ctx, cl); err != nil {
			t.Error(err)
		}
	}

	// Two clusters; "Cluster API" finishes one after the first progress report, the other once a
	// report has shown the first gone (by report, not by time: a busy machine polls late).
	a, b := create("a"), create("b")
	var mu sync.Mutex
	var reports [][]string
	var releaseA, releaseB sync.Once
	abandoned, err := clusterdeletion.Run(ctx, c, clusterdeletion.Deletion{Clusters: []client.ObjectKey{a, b, {Namespace: ns, Name: "gone-already"}}, Timeout: time.Minute, Interval: 100 * time.Millisecond,
		Progress: func(left []machines.View, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			var names []string
			for _, v := range left {
				names = append(names, v.Name)
			}
			reports = append(reports, names)
			releaseA.Do(func() { go release(a) })
			if strings.Join(names, ",") == "b" {
				releaseB.Do(func() { go release(b) })
			}
		}})
	if err != nil || len(abandoned) != 0 {
		t.Fatalf("deletion: %v, abandoned %v", err, abandoned)
	}
	for _, k := range []client.ObjectKey{a, b} {
		if err := c.Get(ctx, k, &clusterv1.Cluster{}); err == nil {
			t.Errorf("%s is still there", k)
		}
	}
	if len(reports) < 2 || strings.Join(reports[0], ",") != "a,b" || strings.Join(reports[len(reports)-1], ",") != "b" {
		t.Errorf("progress reports: %v", reports)
	}

	// One that never goes, given up after a while: returned with the reason, no error.
	stuck := create("stuck")
	abandoned, err = clusterdeletion.Run(ctx, c, clusterdeletion.Deletion{Clusters: []client.ObjectKey{stuck}, Timeout: time.Minute, Interval: 100 * time.Millisecond,
		GiveUp: func(_ context.Context, k client.ObjectKey, elapsed time.Duration) string {
			if elapsed > 300*time.Millisecond {
				return "its provider cannot reach its cloud"
			}
			return ""
		}})
	if err != nil || len(abandoned) != 1 || abandoned[0].Cluster != stuck || abandoned[0].Reason != "its provider cannot reach its cloud" {
		t.Errorf("given up: %v, %+v", err, abandoned)
	}

	// Past the timeout: an error that names it.
	_, err = clusterdeletion.Run(ctx, c, clusterdeletion.Deletion{Clusters: []client.ObjectKey{stuck}, Timeout: 500 * time.Millisecond, Interval: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "default/stuck") {
		t.Errorf("past the timeout: %v", err)
	}
	release(stuck)
}
