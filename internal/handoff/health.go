package handoff

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/fluxobjects"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/readiness"
)

// A unit in its health check waits until Flux looks at its objects again and finds them ready;
// the next unit starts only then. Both Fluxes run with CancelHealthCheckOnNewRevision, under
// which a reconcile request (reconcile.fluxcd.io/requestedAt) interrupts a running health check,
// and the check of the reconciliation it starts passes at its first look. HealthChecks looks at
// the objects a check waits for every second and asks for that reconciliation once all of them
// are ready: a hint, never a verdict, since Flux checks again with its own rules.
//
// What it reads is Flux's documented interface only: the Ready and Healthy conditions' statuses,
// reasons and transition times, spec.wait, spec.healthChecks, spec.healthCheckExprs and the
// inventory. It makes no guess at when Flux looks next; its own bounds (below) keep a hint from
// costing more than it can save, whatever Flux's timing, and ci/bench.sh measures what it saves.

// healthInterval is how often the objects of a unit in its health check are looked at.
const healthInterval = time.Second

// healthSettle is how long a check must have run before objects that were ready at every look of
// ours are taken to wait for Flux's next look: a check whose objects are ready passes at once.
const healthSettle = 2 * time.Second

// maxApplyToInterrupt is the longest apply a hint may cost: the reconciliation a request starts
// applies the unit again (a server-side dry run of every object, heavy for large CRDs) before its
// check. A unit whose apply took longer (capi, cabpk: up to 7 s on a busy management cluster) is
// left to Flux's own looks.
const maxApplyToInterrupt = 2 * time.Second

// HealthChecks follows the units in their health check, one goroutine each, and asks for a
// reconciliation at most once per reconciliation of a unit.
type HealthChecks struct {
	cluster  *kube.Cluster
	interval time.Duration
	now      func() time.Time

	mu       sync.Mutex
	ctx      context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
	watching map[string]bool
	// followed is, for each unit, the start of the last reconciliation followed; asked, when
	// it was last asked to reconcile.
	followed map[string]time.Time
	asked    map[string]time.Time
	remotes  map[string]*kube.Cluster // by kubeconfig Secret namespace/name@resourceVersion
}

// NewHealthChecks follows the units of cluster until Stop.
func NewHealthChecks(ctx context.Context, cluster *kube.Cluster) *HealthChecks {
	ctx, stop := context.WithCancel(ctx)
	return &HealthChecks{
		cluster: cluster, interval: healthInterval, now: time.Now, ctx: ctx, stop: stop,
		watching: map[string]bool{}, followed: map[string]time.Time{}, asked: map[string]time.Time{}, remotes: map[string]*kube.Cluster{},
	}
}

// Follow starts following the units of u whose reconciliation runs its health check and was not
// followed yet. A followed unit whose check ends (passes, fails, is interrupted) is let go by its
// goroutine.
func (h *HealthChecks) Follow(u readiness.Units) {
	if u.Graph == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range u.Graph.Order {
		ks := u.Kustomizations[name]
		check := readiness.HealthCheckOf(ks)
		if !check.Running || h.watching[name] || h.ctx.Err() != nil || h.followed[name].Equal(check.Applying) {
			continue
		}
		// Within minGap of a request, the reconciliation it started may be read as a check (the
		// interrupted check and the apply after it started in the same second).
		if check.ApplyTook() > maxApplyToInterrupt || h.now().Sub(h.asked[name]) < minGap {
			continue
		}
		h.watching[name] = true
		h.followed[name] = check.Applying
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			asked, retry := h.follow(h.ctx, ks.DeepCopy(), check)
			h.mu.Lock()
			defer h.mu.Unlock()
			delete(h.watching, name)
			if retry {
				delete(h.followed, name)
			}
			if !asked.IsZero() {
				h.asked[name] = asked
			}
		}()
	}
}

// Stop ends every goroutine and waits for them.
func (h *HealthChecks) Stop() {
	h.stop()
	h.wg.Wait()
}

// follow waits until the objects the health check of ks waits for are ready, then, if the same
// check still runs, asks Flux for a reconciliation, and says when (zero: not asked). Failures end
// the hint silently: Flux's own check goes on regardless; retry: the objects could not be looked
// at yet, the next look at the units may follow the same check again.
func (h *HealthChecks) follow(ctx context.Context, ks *kustomizev1.Kustomization, check readiness.HealthCheck) (asked time.Time, retry bool) {
	ids, err := readiness.HealthChecked(ks)
	if err != nil {
		return time.Time{}, false
	}
	ids = slowToBeReady(ids)
	if len(ids) == 0 {
		return time.Time{}, false
	}
	c, err := h.clusterOf(ctx, ks)
	if err != nil {
		return time.Time{}, true
	}
	// Stop following once Flux's check is over, whatever the objects do.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(h.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, still := h.stillChecking(ctx, ks, check); !still {
					cancel()
					return
				}
			}
		}
	}()
	waited, err := readiness.WaitHealthy(ctx, c, ks, ids, h.interval)
	if err != nil {
		return time.Time{}, false
	}
	if !waited {
		// Ready at every look of ours: Flux's check passes at its own look unless it has already
		// run past it.
		if wait := healthSettle - h.now().Sub(check.Checking); wait > 0 {
			select {
			case <-ctx.Done():
				return time.Time{}, false
			case <-time.After(wait):
			}
		}
	}
	current, still := h.stillChecking(ctx, ks, check)
	if !still {
		return time.Time{}, false
	}
	now := h.now()
	if _, err := fluxobjects.RequestReconcile(ctx, h.cluster.Client, current, now); err != nil {
		return time.Time{}, false
	}
	return now, false
}

// stillChecking reads ks again and tells whether the check of the same reconciliation still runs.
func (h *HealthChecks) stillChecking(ctx context.Context, ks *kustomizev1.Kustomization, check readiness.HealthCheck) (*kustomizev1.Kustomization, bool) {
	current := &kustomizev1.Kustomization{}
	if err := h.cluster.Client.Get(ctx, client.ObjectKeyFromObject(ks), current); err != nil {
		return nil, false
	}
	now := readiness.HealthCheckOf(current)
	return current, now.Running && now.Applying.Equal(check.Applying) && current.Generation == ks.Generation
}

// clusterOf is the cluster the objects of ks are in: the followed cluster, or the one its
// spec.kubeConfig Secret reaches.
func (h *HealthChecks) clusterOf(ctx context.Context, ks *kustomizev1.Kustomization) (*kube.Cluster, error) {
	if ks.Spec.KubeConfig == nil || ks.Spec.KubeConfig.SecretRef == nil {
		return h.cluster, nil
	}
	ref := ks.Spec.KubeConfig.SecretRef
	data, version, err := kube.KubeconfigSecret{Namespace: ks.Namespace, Name: ref.Name, Key: ref.Key}.Read(ctx, h.cluster.Client)
	if err != nil {
		return nil, fmt.Errorf("unit %s: %w", ks.Name, err)
	}
	key := ks.Namespace + "/" + ref.Name + "@" + version
	h.mu.Lock()
	c, ok := h.remotes[key]
	h.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err = kube.FromKubeconfig(ref.Name, data)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.remotes[key] = c
	h.mu.Unlock()
	return c, nil
}

// slowToBeReady keeps the objects that can take time to be ready once applied: the workloads and
// the other kinds kstatus follows beyond their existence, and every custom resource, which
// reports its own progress. The other built-in kinds (RBAC, ConfigMaps, webhook configurations,
// CRDs, which are established at once and are heavy to read) are ready once they exist.
func slowToBeReady(ids object.ObjMetadataSet) object.ObjMetadataSet {
	var out object.ObjMetadataSet
	for _, id := range ids {
		g := id.GroupKind.Group
		builtIn := g == "" || !strings.Contains(g, ".") || strings.HasSuffix(g, ".k8s.io")
		if !builtIn {
			out = append(out, id)
			continue
		}
		switch id.GroupKind.String() {
		case "Deployment.apps", "StatefulSet.apps", "DaemonSet.apps", "ReplicaSet.apps",
			"Job.batch", "Pod", "PersistentVolumeClaim", "Service", "PodDisruptionBudget.policy":
			out = append(out, id)
		}
	}
	return out
}
