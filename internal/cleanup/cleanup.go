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
	"cluster-init.dev/cluster-init/internal/clusterdeletion"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
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
	Namespace string // where the Cluster API cluster is defined; the release's namespace if empty
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
	if t.Namespace == "" {
		t.Namespace = names.Namespace
	}
	if t.flux == nil {
		t.flux = t.renderFlux
	}
	if t.takeBack == nil {
		t.takeBack = t.takeBackIntoKind
	}
	return run(ctx, kind, containers, t, records.Of(t.State, t.Environment), log)
}

// cleaner is one cleanup of a target: the host's kind clusters and containers, the records of
// the environment and the containers known to be its.
type cleaner struct {
	kind       KindClusters
	containers Containers
	t          Target
	rec        records.Environment
	owned      records.Owned
	log        func(string, ...any)
}

// run decides which of the four cleanups the target needs, from what this machine recorded and
// what the clusters say, and runs its steps:
//   - adopted (adopted.go): the management cluster stays, what cluster-init installed goes;
//   - CAPD (capd.go): the kind cluster, the workload clusters, then the machines' containers;
//   - kind (kind.go): the Cluster was only in the kind cluster, deleted with it;
//   - taken back (takeback.go): a self-managed cluster whose machines are not this host's,
//     moved into a kind cluster and deleted there.
func run(ctx context.Context, kind KindClusters, containers Containers, t Target, rec records.Environment, log func(string, ...any)) error {
	owned, err := records.ReadContainers(rec.Containers)
	if err != nil {
		return err
	}
	c := &cleaner{kind: kind, containers: containers, t: t, rec: rec, owned: owned, log: log}
	management, adopted, err := c.management(ctx)
	if err != nil {
		return err
	}
	switch {
	case adopted:
		return c.removeAdopted(ctx, management)
	case t.CAPD:
		return c.removeCAPD(ctx, management)
	case management == nil:
		return c.removeKind(ctx)
	default:
		return c.takeBack(ctx, management)
	}
}

// management connects to the environment's self-managed (or adopted) management cluster, if this
// machine has its kubeconfig, and says whether it is adopted: as recorded here, or as the cluster
// says (its state outlives a lost record).
func (c *cleaner) management(ctx context.Context) (m *kube.Cluster, adopted bool, err error) {
	if _, err := os.Stat(c.rec.Kubeconfig); err != nil {
		return nil, false, nil
	}
	if m, err = kube.FromFile("management", c.rec.Kubeconfig); err != nil {
		return nil, false, fmt.Errorf("the management kubeconfig %s: %w", c.rec.Kubeconfig, err)
	}
	c.remember(ctx, m)
	_, statErr := os.Stat(c.rec.Adopted)
	recorded := statErr == nil
	st, _, err := managementstate.Read(ctx, m.Client)
	if recorded && err != nil {
		return nil, false, fmt.Errorf("the adopted management cluster of %s (%s) does not answer, nothing was removed: %w; if it is gone, remove %s and %s", c.t.Environment, m.Config.Host, err, c.rec.Kubeconfig, c.rec.Adopted)
	}
	return m, recorded || st.Adopted, nil
}

// remember records the containers of what cl defines before anything is deleted, so that a
// cleanup interrupted half-way still knows them the next time.
func (c *cleaner) remember(ctx context.Context, cl *kube.Cluster) {
	if !c.t.CAPD || c.rec.Containers == "" {
		return
	}
	more, err := records.OwnedContainers(ctx, cl.Client)
	if err != nil {
		c.log("could not list the machines of the %s cluster: %v", cl.Name, err)
		return
	}
	for n := range more {
		c.owned[n] = true
	}
	if err := records.MergeContainers(c.rec.Containers, more); err != nil {
		c.log("could not record the containers: %v", err)
	}
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
	_, err := clusterdeletion.Run(ctx, m.Client, clusterdeletion.Deletion{Clusters: keys, Timeout: 10 * time.Minute, Progress: progressLog("the workload clusters", log)})
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
	abandoned, err := clusterdeletion.Run(ctx, c.Client, clusterdeletion.Deletion{
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
