package pivot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
)

// move runs clusterctl move of the namespace, from the bootstrap cluster to the management
// cluster.
func (p *pivot) move(ctx context.Context, _ *State) error {
	m, err := p.connect(ctx)
	if err != nil {
		return err
	}
	return Move(ctx, p.Bootstrap, m, p.Namespace, p.WorkDir)
}

// wake wakes, in the management cluster, what does not notice the move (Wake).
func (p *pivot) wake(ctx context.Context, _ *State) error {
	m, err := p.connect(ctx)
	if err != nil {
		return err
	}
	return Wake(ctx, m.Client, p.Namespace)
}

// Move runs clusterctl move of the namespace from one cluster to the other, through the
// clusterctl client library; Wake must follow. clusterctl reads kubeconfig files: they are
// written into workDir for the time of the move.
func Move(ctx context.Context, from, to *kube.Cluster, namespace, workDir string) error {
	fromPath := filepath.Join(workDir, "from.kubeconfig")
	toPath := filepath.Join(workDir, "to.kubeconfig")
	if err := os.WriteFile(fromPath, from.Kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write the kubeconfig clusterctl moves from: %w", err)
	}
	defer os.Remove(fromPath)
	if err := os.WriteFile(toPath, to.Kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write the kubeconfig clusterctl moves to: %w", err)
	}
	defer os.Remove(toPath)
	c, err := Clusterctl(ctx)
	if err != nil {
		return err
	}
	if err := c.Move(ctx, clusterctl.MoveOptions{
		FromKubeconfig: clusterctl.Kubeconfig{Path: fromPath},
		ToKubeconfig:   clusterctl.Kubeconfig{Path: toPath},
		Namespace:      namespace,
	}); err != nil {
		return fmt.Errorf("clusterctl move of namespace %s from the %s cluster to the %s cluster: %w", namespace, from.Name, to.Name, err)
	}
	return nil
}

// wakeTimeout bounds Wake: a server never created has no instance to report, and waking it
// again changes nothing.
const wakeTimeout = 90 * time.Second

// Wake wakes the moved objects that do not notice the move (wakeAfterMove), again every 15 s
// while one has not reported its instance: the controller may still have seen its Cluster paused
// in its cache when the first change arrived.
func Wake(ctx context.Context, c client.Client, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, wakeTimeout)
	defer cancel()
	for {
		asleep, err := wakeAfterMove(ctx, c, namespace, time.Now())
		if err != nil || asleep == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(15 * time.Second):
		}
	}
}

// notWatchingTheirCluster are the kinds whose controller does not watch their Cluster: clusterctl
// move creates them under a paused Cluster, they are reconciled once, see it paused, and are
// never reconciled again when the move unpauses it. CAPO v0.13.0's OpenStackServer is one
// (cluster-api-provider-openstack issue 2824, fixed after that release): its machines then wait
// for ever, "Waiting for OpenStackServer to be ready".
var notWatchingTheirCluster = []schema.GroupVersionKind{
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "OpenStackServerList"},
}

// wakeAfterMove changes an annotation of every moved object of those kinds that has not reported
// its instance yet (clusterctl move does not carry status), which makes its controller reconcile
// it again, now that its Cluster runs; it returns how many it woke.
func wakeAfterMove(ctx context.Context, c client.Client, namespace string, now time.Time) (int, error) {
	woken := 0
	for _, gvk := range notWatchingTheirCluster {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			if meta.IsNoMatchError(err) {
				continue // the provider is not installed here
			}
			return woken, fmt.Errorf("list the moved %s: %w", strings.TrimSuffix(gvk.Kind, "List"), err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			if id, _, _ := unstructured.NestedString(o.Object, "status", "instanceID"); id != "" {
				continue // reconciled since the move
			}
			patch := client.MergeFrom(o.DeepCopy())
			annotations := o.GetAnnotations()
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[names.MovedAtAnnotation] = now.UTC().Format(time.RFC3339)
			o.SetAnnotations(annotations)
			if err := c.Patch(ctx, o, patch); err != nil {
				return woken, fmt.Errorf("wake the moved %s %s: %w", o.GetKind(), o.GetName(), err)
			}
			woken++
		}
	}
	return woken, nil
}

// Clusterctl is a clusterctl client that reads no configuration file and no environment: what
// it moves is given to it, and nothing is fetched.
func Clusterctl(ctx context.Context) (clusterctl.Client, error) {
	cfg, err := config.New(ctx, "", config.InjectReader(config.NewMemoryReader()))
	if err != nil {
		return nil, fmt.Errorf("clusterctl configuration: %w", err)
	}
	c, err := clusterctl.New(ctx, "", clusterctl.InjectConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("clusterctl client: %w", err)
	}
	return c, nil
}
