package handoff

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/readiness"
)

// A unit in its health check is looked at by kustomize-controller every 5 s, a fixed interval: the
// next unit would start on average 2.5 s after the objects turned ready, at each level of the
// graph. Both Fluxes run with CancelHealthCheckOnNewRevision, under which a reconcile request
// interrupts a running health check and the check of the new reconciliation passes at its first
// look. HealthChecks looks at the objects a check waits for every second and asks for that
// reconciliation when all of them are ready: a hint, never a verdict, since Flux checks again
// with its own rules.

// healthInterval is how often the objects of a unit in its health check are looked at.
const healthInterval = time.Second

// healthSettle is how old a health check must be before it is interrupted: Flux's first look,
// right as the check starts, passes by itself for objects already ready.
const healthSettle = 2 * time.Second

// fluxHealthInterval is kustomize-controller's fixed interval between two looks of a health check.
const fluxHealthInterval = 5 * time.Second

// lookSpan is when a look of Flux's may be under way after start + k·fluxHealthInterval: the start
// is known to the second, and a look at many objects on a busy cluster took up to half a second.
const lookSpan = 1500 * time.Millisecond

// The reconciliation a request starts applies the unit again (a server-side dry run of every
// object, heavy for large CRDs) before its check: worth it only if Flux's own next look is further
// away than that. Its cost is taken from the apply of the reconciliation being checked, within
// these bounds. A unit at the upper bound (large CRDs: capi, cabpk) is left to Flux: its next look
// is never further than fluxHealthInterval − lookSpan, and on a busy management cluster its
// re-apply was seen to take 7 s.
const (
	minReapply = 500 * time.Millisecond
	maxReapply = 3 * time.Second
)

// maxHealthRequests bounds the requests for one unit until it is seen ready: a hint that turns
// out early (an object this side does not look at) costs Flux a reconciliation each time.
const maxHealthRequests = 3

// HealthChecks follows the units in their health check, one goroutine each.
type HealthChecks struct {
	cluster  *kube.Cluster
	interval time.Duration
	now      func() time.Time

	mu       sync.Mutex
	ctx      context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
	watching map[string]bool
	asked    map[string]healthRequests
	remotes  map[string]*kube.Cluster // by kubeconfig Secret namespace/name@resourceVersion
}

type healthRequests struct {
	last  time.Time
	count int
}

// NewHealthChecks follows the units of cluster until Stop.
func NewHealthChecks(ctx context.Context, cluster *kube.Cluster) *HealthChecks {
	ctx, stop := context.WithCancel(ctx)
	return &HealthChecks{
		cluster: cluster, interval: healthInterval, now: time.Now, ctx: ctx, stop: stop,
		watching: map[string]bool{}, asked: map[string]healthRequests{}, remotes: map[string]*kube.Cluster{},
	}
}

// Follow starts following the units of u that are in their health check and not followed yet.
// A followed unit whose check ends (passes, fails, is interrupted) is let go by its goroutine.
func (h *HealthChecks) Follow(u readiness.Units) {
	if u.Graph == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range u.Graph.Order {
		ks := u.Kustomizations[name]
		if u.Status(name).State == readiness.Ready {
			delete(h.asked, name)
			continue
		}
		in, since := readiness.InHealthCheck(ks)
		if !in || h.watching[name] || h.ctx.Err() != nil {
			continue
		}
		if a := h.asked[name]; a.count >= maxHealthRequests || h.now().Sub(a.last) < minGap {
			continue
		}
		h.watching[name] = true
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.follow(h.ctx, name, ks.DeepCopy(), since)
			h.mu.Lock()
			delete(h.watching, name)
			h.mu.Unlock()
		}()
	}
}

// Stop ends every goroutine and waits for them.
func (h *HealthChecks) Stop() {
	h.stop()
	h.wg.Wait()
}

// follow waits until the objects the health check of ks waits for are ready, then, if the check
// is still running, asks Flux for a reconciliation. Failures end the hint silently: Flux's own
// check goes on regardless.
func (h *HealthChecks) follow(ctx context.Context, unit string, ks *kustomizev1.Kustomization, since time.Time) {
	ids, err := readiness.HealthChecked(ks)
	if err != nil {
		return
	}
	ids = slowToBeReady(ids)
	if len(ids) == 0 {
		return
	}
	c, err := h.clusterOf(ctx, ks)
	if err != nil {
		return
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
				if in, _ := h.inHealthCheck(ctx, ks); !in {
					cancel()
					return
				}
			}
		}
	}()
	if err := readiness.WaitHealthy(ctx, c, ks, ids, h.interval); err != nil {
		return
	}
	if wait := healthSettle - h.now().Sub(since); wait > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	in, current := h.inHealthCheck(ctx, ks)
	if !in || !worthAsking(current, h.now()) {
		return
	}
	now := h.now()
	if _, err := RequestReconcile(ctx, h.cluster.Client, current, now); err != nil {
		return
	}
	h.mu.Lock()
	a := h.asked[unit]
	h.asked[unit] = healthRequests{last: now, count: a.count + 1}
	h.mu.Unlock()
}

// inHealthCheck reads ks again and tells whether its check is still running.
func (h *HealthChecks) inHealthCheck(ctx context.Context, ks *kustomizev1.Kustomization) (bool, *kustomizev1.Kustomization) {
	current := &kustomizev1.Kustomization{}
	if err := h.cluster.Client.Get(ctx, client.ObjectKeyFromObject(ks), current); err != nil {
		return false, nil
	}
	in, _ := readiness.InHealthCheck(current)
	return in && current.Generation == ks.Generation, current
}

// worthAsking tells whether interrupting the health check of ks at now makes it pass sooner than
// Flux's next look: false when that look is under way, or comes before a new reconciliation would
// have applied the unit again. The cluster records the check's start to the second, and a look at
// many objects on a busy cluster takes up to half a second, so each look falls within lookSpan
// after start + k·5 s (a request in the middle of a look that passes costs a whole re-apply). When
// the conditions cannot place the check (one started again after an interruption keeps its older
// transition time), it is worth asking.
func worthAsking(ks *kustomizev1.Kustomization, now time.Time) bool {
	healthy := apimeta.FindStatusCondition(ks.Status.Conditions, meta.HealthyCondition)
	// Ready turns Unknown when the reconciliation starts applying and stays so through the
	// check; Reconciling may turn again when the check starts, which would hide the apply's cost.
	ready := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition)
	if healthy == nil || ready == nil || ready.Status != metav1.ConditionUnknown {
		return true
	}
	checkStart, applyStart := healthy.LastTransitionTime.Time, ready.LastTransitionTime.Time
	if checkStart.Before(applyStart) || now.Sub(checkStart) > time.Minute {
		return true
	}
	reapply := min(max(checkStart.Sub(applyStart), minReapply), maxReapply)
	// The first look whose span has not passed yet.
	k := (now.Sub(checkStart)-lookSpan)/fluxHealthInterval + 1
	if now.Sub(checkStart) < lookSpan {
		k = 0
	}
	nextLook := checkStart.Add(k * fluxHealthInterval)
	if !now.Before(nextLook) {
		return false
	}
	return nextLook.Sub(now) > reapply+500*time.Millisecond
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
