package cleanup

import (
	"context"
	"fmt"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/fluxobjects"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/placement"
)

// deleteApplications removes the placed applications while the placement controller and the
// clusters they run on still run: each goes from its clusters (Flux prunes what it applied there),
// then its finalizer lets it go. Deleting the applications unit first would take the controller
// away and leave the Applications with a finalizer nothing removes.
func deleteApplications(ctx context.Context, c *kube.Cluster, log func(string, ...any)) error {
	// Nothing re-creates them from git.
	if err := fluxobjects.Suspend(ctx, c.Client, &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: names.ApplicationsKustomization}}); err != nil {
		return err
	}
	apps, err := placement.List(ctx, c.Client)
	if err != nil || len(apps) == 0 {
		return err
	}
	for _, a := range apps {
		log("deleting application %s/%s (it goes from every cluster it runs on)", a.Namespace, a.Name)
		if err := c.Client.Delete(ctx, &a); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete application %s/%s: %w", a.Namespace, a.Name, err)
		}
	}
	start := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, stepTimeout, true, func(ctx context.Context) (bool, error) {
		left, err := placement.List(ctx, c.Client)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, nil
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the applications are still being removed after %s", time.Since(start).Round(time.Second))
	}
	return nil
}
