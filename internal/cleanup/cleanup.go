// Package cleanup removes what a bootstrap created: the workload clusters of its management
// cluster and the Cluster API cluster (deleted through Cluster API while a cluster still runs its
// controllers, so that machines go away cleanly), the kind bootstrap cluster, and any CAPD machine
// container left over.
package cleanup

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/bootstrap"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/pivot"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/reconcileerrors"
	"cluster-init.dev/cluster-init/internal/records"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/standalone"
	"cluster-init.dev/cluster-init/internal/statedir"
)

// Target is what to remove.
type Target struct {
	Environment string
	// State is the state directory: the environment's records (the management kubeconfig, the
	// containers, the adopted mark), removed at the end, and its standalone state, which decides
	// whether a cleanup may run at all (standalone.HoldForCleanup).
	State     statedir.Dir
	Kind      string // the kind cluster's name
	Namespace string // where the Cluster API cluster is defined
	Cluster   string // the Cluster API cluster's name
	CAPD      bool   // its machines are containers of this host
	// Bootstrap is what a bootstrap of the environment is given (the checkout, its values, the
	// state directory, the printer): the kind cluster a self-managed cluster is taken back into is
	// made with it (bootstrap.TakeBack), and the Flux objects removed from an adopted cluster are
	// rendered from its checkout.
	Bootstrap bootstrap.Common

	// flux and takeBack are Bootstrap's (renderFlux, takeBackIntoKind) unless a test sets them.
	flux     func(context.Context) ([]*unstructured.Unstructured, error)
	takeBack func(context.Context) (*kube.Cluster, error)
}

// KindClusters are the host's kind clusters, as cleanup uses them: *kindcluster.Manager on the
// host, an API server without Docker in tests.
type KindClusters interface {
	Exists(name string) (bool, error)
	Connect(name string) (*kube.Cluster, error)
	// Owns fails unless the kind cluster is cluster-init's for the environment.
	Owns(ctx context.Context, c *kube.Cluster, name, environment string) error
	Delete(name string) error
}

var _ KindClusters = (*kindcluster.Manager)(nil)

// Run removes the target from the host's kind clusters and containers (DockerCLI), reporting
// each step. Containers are removed directly only when they are this environment's: named after a
// machine or load balancer of its clusters (as the clusters reachable now define them, or as
// recorded before). An environment with a standalone cluster is refused (`bootstrap delete`
// removes it), but for an interrupted creation, whose state goes too.
func Run(ctx context.Context, kind KindClusters, containers Containers, t Target, log func(string, ...any)) (err error) {
	hold, err := standalone.HoldForCleanup(t.State.Standalone(), t.Environment)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := hold.Release(err == nil); err == nil {
			err = rerr
		}
	}()
	if t.flux == nil {
		t.flux = t.renderFlux
	}
	if t.takeBack == nil {
		t.takeBack = t.takeBackIntoKind
	}
	return run(ctx, kind, containers, t, records.Of(t.State, t.Environment), log)
}

func run(ctx context.Context, kind KindClusters, containers Containers, t Target, rec records.Environment, log func(string, ...any)) error {
	owned, err := records.ReadContainers(rec.Containers)
	if err != nil {
		return err
	}
	// What the clusters define is recorded before anything is deleted, so that a cleanup
	// interrupted half-way still knows it the next time.
	remember := func(c *kube.Cluster) {
		if !t.CAPD || rec.Containers == "" {
			return
		}
		more, err := records.OwnedContainers(ctx, c.Client)
		if err != nil {
			log("could not list the machines of the %s cluster: %v", c.Name, err)
			return
		}
		for n := range more {
			owned[n] = true
		}
		if err := records.MergeContainers(rec.Containers, more); err != nil {
			log("could not record the containers: %v", err)
		}
	}
	var management *kube.Cluster
	if _, err := os.Stat(rec.Kubeconfig); err == nil {
		if management, err = kube.FromFile("management", rec.Kubeconfig); err != nil {
			return fmt.Errorf("the management kubeconfig %s: %w", rec.Kubeconfig, err)
		}
		remember(management)
		// Adopted: as recorded here, or as the cluster says (its state outlives a lost record).
		_, statErr := os.Stat(rec.Adopted)
		recorded := statErr == nil
		st, _, err := managementstate.Read(ctx, management.Client)
		if recorded && err != nil {
			return fmt.Errorf("the adopted management cluster of %s (%s) does not answer, nothing was removed: %w; if it is gone, remove %s and %s", t.Environment, management.Config.Host, err, rec.Kubeconfig, rec.Adopted)
		}
		if recorded || st.Adopted {
			return removeAdopted(ctx, management, containers, t, rec, owned, log)
		}
	}
	// deleted: the Cluster is gone from the bootstrap cluster with everything its provider made.
	deleted := false
	exists, err := kind.Exists(t.Kind)
	if err != nil {
		return err
	}
	if exists {
		c, err := kind.Connect(t.Kind)
		if err != nil {
			return err
		}
		if err := kind.Owns(ctx, c, t.Kind, t.Environment); err != nil {
			return fmt.Errorf("kind cluster %s: %w: not deleting it", t.Kind, err)
		}
		remember(c)
		// After the move, the machines are defined in the management cluster, which the pivot's
		// copy of its kubeconfig reaches even when the bootstrap did not finish.
		if management == nil {
			if m, err := pivot.SavedManagement(ctx, c.Client, t.Namespace); err == nil {
				remember(m)
			}
		}
		// Defined here: not moved to the management cluster by a pivot.
		defined := c.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Cluster}, &clusterv1.Cluster{}) == nil
		err = deleteCluster(ctx, c, t, log)
		deleted = defined && err == nil
		if err != nil {
			if !t.CAPD {
				// Machines elsewhere than this host: the kind cluster is the only record of what
				// the provider created there, and goes only once nothing is.
				left, lerr := recordedResources(ctx, c.Client, t.Namespace, t.Cluster)
				deleted = defined && lerr == nil && len(left) == 0
				if !deleted {
					return fmt.Errorf("cluster %s/%s was not deleted through Cluster API: %v; its provider recorded what it created (%s): kind cluster %s is kept, the only record of it. Run cleanup again once the provider can reach its infrastructure, or delete those resources there and then the kind cluster", t.Namespace, t.Cluster, err, describeLeft(left, lerr), t.Kind)
				}
			} else {
				log("could not delete Cluster %s through Cluster API: %v (removing its containers directly)", t.Cluster, err)
			}
		}
		log("deleting kind cluster %s", t.Kind)
		if err := kind.Delete(t.Kind); err != nil {
			return err
		}
	} else {
		log("no kind cluster %s", t.Kind)
	}
	if !t.CAPD {
		// No management cluster: the Cluster was only ever in the bootstrap cluster.
		if management == nil || deleted {
			if deleted {
				log("Cluster %s is deleted, and nothing its provider made is left", t.Cluster)
			}
			return rec.Forget(log)
		}
		return takeBack(ctx, kind, management, t, rec, log)
	}
	workloads, err := deleteWorkloadClusters(ctx, management, t, log)
	if err != nil {
		log("could not delete the workload clusters through Cluster API: %v (removing their containers directly)", err)
	}
	if err := removeContainers(ctx, containers, append(workloads, t.Cluster), owned, log); err != nil {
		return err
	}
	return rec.Forget(log)
}

// renderFlux renders the Flux objects bootstrap installs, from the checkout.
func (t Target) renderFlux(ctx context.Context) ([]*unstructured.Unstructured, error) {
	r, err := render.New(t.Bootstrap.RepoRoot, t.Bootstrap.KubeVersion, t.Bootstrap.BuildCache)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Flux(ctx)
}

// takeBackIntoKind makes the kind cluster Kind with the environment's providers and no cluster
// (bootstrap.TakeBack, its own source as a bootstrap without --source), its progress and summary
// shown by the printer of Bootstrap, and returns it.
func (t Target) takeBackIntoKind(ctx context.Context) (*kube.Cluster, error) {
	start := time.Now()
	c, res, err := bootstrap.TakeBack(ctx, bootstrap.TakeBackOptions{Common: t.Bootstrap})
	var phases []progress.Span
	if res != nil {
		phases = res.Phases
	}
	t.Bootstrap.Out.Summary(phases, time.Since(start), t.Bootstrap.Redactor.Error(err))
	return c, err
}

// removeAdopted removes what cluster-init installed into the adopted management cluster and
// the workload clusters it made, and leaves the cluster itself running.
func removeAdopted(ctx context.Context, m *kube.Cluster, containers Containers, t Target, rec records.Environment, owned records.Owned, log func(string, ...any)) error {
	log("the management cluster of %s is adopted (%s): removing what cluster-init installed, the cluster itself stays", t.Environment, m.Config.Host)
	flux, err := t.flux(ctx)
	if err != nil {
		return err
	}
	workloads, err := uninstall(ctx, m, flux, log)
	if err != nil {
		return err
	}
	// Their machines, should Cluster API have left one.
	if t.CAPD && len(workloads) > 0 {
		if err := removeContainers(ctx, containers, workloads, owned, log); err != nil {
			return err
		}
	}
	return rec.Forget(log)
}

// deleteWorkloadClusters deletes, through the management cluster's own Cluster API, every other
// cluster it manages (the workload clusters), and returns their names. Their definitions would
// come back from git: the management cluster goes right after.
func deleteWorkloadClusters(ctx context.Context, m *kube.Cluster, t Target, log func(string, ...any)) ([]string, error) {
	if m == nil {
		return nil, nil
	}
	list := &clusterv1.ClusterList{}
	if err := m.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list the workload clusters: %w", err)
	}
	var names []string
	var keys []client.ObjectKey
	for i := range list.Items {
		cl := &list.Items[i]
		if cl.Namespace == t.Namespace && cl.Name == t.Cluster {
			continue
		}
		names = append(names, cl.Name)
		keys = append(keys, client.ObjectKeyFromObject(cl))
		log("deleting workload cluster %s/%s (its machines go with it)", cl.Namespace, cl.Name)
	}
	_, err := machines.DeleteClusters(ctx, m.Client, machines.Deletion{Clusters: keys, Timeout: 10 * time.Minute, Progress: progressLog("the workload clusters", log)})
	return names, err
}

// progressLog logs the clusters a deletion still waits for, at most every 15 seconds.
func progressLog(what string, log func(string, ...any)) func([]machines.View, time.Duration) {
	var last time.Time
	return func(left []machines.View, elapsed time.Duration) {
		if time.Since(last) < 15*time.Second {
			return
		}
		last = time.Now()
		var names []string
		for _, v := range left {
			names = append(names, fmt.Sprintf("%s/%s (%d machines)", v.Namespace, v.Name, len(v.Machines)))
		}
		log("waiting for the deletion of %s (%s): %s", what, elapsed.Round(time.Second), strings.Join(names, ", "))
	}
}

// unreachableAfter is how long the deletion of a Cluster whose provider recorded nothing it
// created is waited for: a provider that can reach its infrastructure has finished by then.
const unreachableAfter = 30 * time.Second

// describeLeft lists what a provider recorded, or why it could not be read.
func describeLeft(left []string, err error) string {
	if err != nil {
		return "could not be read: " + err.Error()
	}
	return strings.Join(left, "; ")
}

// deleteCluster deletes the Cluster API cluster from the bootstrap cluster and waits until its
// controllers have removed it. Without running controllers nothing would remove it: the
// containers are removed directly instead.
func deleteCluster(ctx context.Context, c *kube.Cluster, t Target, log func(string, ...any)) error {
	// A kind cluster that does not define the Cluster (one whose making stopped before Cluster
	// API was installed, say) records nothing: there is nothing to delete through it.
	cl := &clusterv1.Cluster{}
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Cluster}, cl)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Cluster %s/%s: %w", t.Namespace, t.Cluster, err)
	}
	core := &appsv1.Deployment{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "capi-system", Name: "capi-controller-manager"}, core); err != nil || core.Status.AvailableReplicas == 0 {
		return fmt.Errorf("no Cluster API controller runs in the bootstrap cluster")
	}
	log("deleting Cluster %s/%s (its machines go with it)", t.Namespace, t.Cluster)
	abandoned, err := machines.DeleteClusters(ctx, c.Client, machines.Deletion{
		Clusters: []client.ObjectKey{client.ObjectKeyFromObject(cl)},
		Timeout:  5 * time.Minute,
		Progress: progressLog("Cluster "+t.Cluster, log),
		GiveUp: func(ctx context.Context, k client.ObjectKey, elapsed time.Duration) string {
			// A provider that cannot reach its infrastructure never removes its finalizer: once the
			// deletion has had its time, and the provider recorded nothing it created, nothing is
			// left behind by not waiting for it.
			if t.CAPD || elapsed < unreachableAfter {
				return ""
			}
			if left, err := recordedResources(ctx, c.Client, k.Namespace, k.Name); err != nil || len(left) > 0 {
				return ""
			}
			why := "its provider does not finish"
			if lines, err := reconcileerrors.OfCluster(ctx, c, k.Namespace, k.Name); err == nil && len(lines) > 0 {
				why = lines[0]
			}
			return why
		},
	})
	for _, a := range abandoned {
		log("Cluster %s is not deleted after %s: %s. Its provider recorded nothing it created: nothing is left behind, not waiting for it", a.Cluster, unreachableAfter, a.Reason)
	}
	return err
}
