package backupjob

import (
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
)

// The lock's timing: a run renews it every few seconds; one killed holds it a minute at most.
const (
	lockLease = time.Minute
	lockRenew = 40 * time.Second
	lockRetry = 5 * time.Second
)

// exclusively runs fn while it holds the backups' Lease (names.BackupLock), with client-go's
// leader election: runs of the schedule and runs on demand never overlap, so that one never finds
// the clusters paused by another, nor overwrites its record. It waits for the lock as long as ctx
// lets it; fn's context ends if the lock is lost.
func exclusively(ctx context.Context, c *kube.Cluster, namespace string, fn func(context.Context) error) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("the backups' lock: %w", err)
	}
	identity, _ := os.Hostname()
	identity = fmt.Sprintf("%s-%d", identity, time.Now().UnixNano())
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := false
	var runErr error
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: names.BackupLock},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		LeaseDuration:   lockLease,
		RenewDeadline:   lockRenew,
		RetryPeriod:     lockRetry,
		ReleaseOnCancel: true,
		Name:            names.BackupLock,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				ran = true
				runErr = fn(ctx)
				cancel()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("the backups' lock: %w", err)
	}
	le.Run(lctx)
	if !ran {
		return fmt.Errorf("another backup held Lease %s/%s all along: %w", namespace, names.BackupLock, context.Cause(ctx))
	}
	return runErr
}
