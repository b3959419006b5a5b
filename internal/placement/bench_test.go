package placement_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/go-logr/logr/funcr"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/placement"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// BenchmarkPlacement is the placement controller against a real API server (envtest), as it runs
// in production: the reconciler reads through a manager's cache and writes to the API server,
// with no client-side rate limit. Each case is a fresh API server with C Clusters and A
// Applications whose selector matches every Cluster, that is C×A Kustomizations:
//
//   - first: every Application reconciled once with nothing placed yet (all created);
//   - resync: every Application reconciled once when nothing is to change (every Kustomization
//     Ready, every status written): what a restart, or any Cluster's change, costs.
//
// An op is one pass over every Application; ms/application and µs/placement divide it.
// cpu-µs/placement is the CPU the process spent (the reconciler, the cache and its watches; not
// the API server's), steadier than the wall time on a busy machine. heap-MB is the live heap once
// the cache holds everything (what the controller's process keeps), peak-heap-MB the most seen
// during the op. The big cases take minutes each: -benchtime=1x.
func BenchmarkPlacement(b *testing.B) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("needs a real API server: export KUBEBUILDER_ASSETS=$(tools/testbed/envtest-assets)")
	}
	for _, clusters := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("clusters=%d", clusters), func(b *testing.B) {
			for _, apps := range []int{10, 100} {
				b.Run(fmt.Sprintf("applications=%d", apps), func(b *testing.B) {
					p := newPlacementBench(b, clusters, apps)
					b.Run("first", p.first)
					b.Run("resync", p.resync)
				})
			}
		})
	}
}

// placementBench is one case of BenchmarkPlacement: its API server, cache and Applications.
type placementBench struct {
	ctx      context.Context
	c        client.Client // the manager's: reads from its cache
	api      client.Reader // the API server itself, to know when the cache has caught up
	r        *placement.Reconciler
	apps     []reconcile.Request
	clusters int
	placed   bool // the Kustomizations exist
}

const benchClusterNamespace = "workload-clusters"

func newPlacementBench(b *testing.B, clusters, apps int) *placementBench {
	kc := testenv.Start(b, "management")
	// As the controller's own configuration (ctrlconfig.GetConfig): no client-side rate limit,
	// the API server's priority and fairness decides.
	cfg := rest.CopyConfig(kc.Config)
	cfg.QPS = -1
	scheme, err := kube.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	// Its logs dropped (logr.Discard's nil sink would be taken for none, and the global logger used).
	quiet := funcr.New(func(string, string) {}, funcr.Options{})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Logger: quiet, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		b.Fatal(err)
	}
	r := &placement.Reconciler{Client: mgr.GetClient(), RequeueAfter: time.Minute, Rules: placement.Rules{
		Management: client.ObjectKey{Namespace: "cluster-init", Name: "management"}, SelectorNamespaces: []string{benchClusterNamespace}}}
	ctx, cancel := context.WithCancel(context.Background())
	// As SetupWithManager, which would start the controller too.
	if err := r.IndexPlacedObjects(ctx, mgr.GetFieldIndexer()); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("the manager's cache did not start")
	}
	// The informers SetupWithManager starts, before anything is timed.
	for _, l := range []client.ObjectList{&appsv1alpha1.ApplicationList{}, &clusterv1.ClusterList{}, &kustomizev1.KustomizationList{}, &helmv2.HelmReleaseList{}} {
		if err := mgr.GetClient().List(ctx, l); err != nil {
			b.Fatal(err)
		}
	}

	p := &placementBench{ctx: ctx, c: mgr.GetClient(), api: mgr.GetAPIReader(), clusters: clusters, r: r}
	w := &world{t: b, ctx: ctx, c: p.c}
	cs := make([]cluster, clusters)
	for i := range cs {
		cs[i] = cluster{benchClusterNamespace, fmt.Sprintf("wl-%04d", i), "dev"}
	}
	w.clusters(cs)
	if err := p.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-init"}}); err != nil {
		b.Fatal(err)
	}
	for i := range apps {
		app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: fmt.Sprintf("app-%03d", i)},
			Spec: appsv1alpha1.ApplicationSpec{SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "cluster-init"},
				Path: fmt.Sprintf("./apps/app-%03d", i), Placement: appsv1alpha1.Placement{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}}}
		if err := p.c.Create(ctx, app); err != nil {
			b.Fatal(err)
		}
		p.apps = append(p.apps, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(app)})
	}
	p.await(b, "the Clusters and Applications", func() (bool, error) {
		cl, al := &clusterv1.ClusterList{}, &appsv1alpha1.ApplicationList{}
		if err := p.c.List(ctx, cl); err != nil {
			return false, err
		}
		err := p.c.List(ctx, al)
		return len(cl.Items) == clusters && len(al.Items) == apps, err
	})
	return p
}

// first places every Application on every cluster, from nothing.
func (p *placementBench) first(b *testing.B) {
	b.ReportAllocs()
	var m meter
	for range b.N {
		if p.placed {
			b.StopTimer()
			p.unplace(b)
			b.StartTimer()
		}
		m.start()
		p.pass(b)
		m.stop()
		p.placed = true
	}
	b.StopTimer()
	p.report(b, &m)
}

// resync reconciles every Application with nothing to change: Flux reported every Kustomization
// Ready and the statuses say so.
func (p *placementBench) resync(b *testing.B) {
	p.flux(b)
	p.pass(b)
	p.awaitApplications(b)
	var m meter
	b.ReportAllocs()
	m.start()
	for b.Loop() {
		p.pass(b)
	}
	m.stop()
	p.report(b, &m)
}

// pass reconciles every Application once, as the controller's one worker does after a restart.
func (p *placementBench) pass(b *testing.B) {
	for _, req := range p.apps {
		if _, err := p.r.Reconcile(p.ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func (p *placementBench) report(b *testing.B, m *meter) {
	ms := float64(b.Elapsed().Microseconds()) / 1000 / float64(b.N)
	placements := float64(b.N * len(p.apps) * p.clusters)
	b.ReportMetric(ms/float64(len(p.apps)), "ms/application")
	b.ReportMetric(ms*1000*float64(b.N)/placements, "µs/placement")
	b.ReportMetric(float64(m.cpu.Microseconds())/placements, "cpu-µs/placement")
	b.ReportMetric(float64(m.peak)/(1<<20), "peak-heap-MB")
	runtime.GC()
	b.ReportMetric(float64(heapLive())/(1<<20), "heap-MB")
}

// unplace deletes every Kustomization and the Applications' statuses, as before the first pass
// (their finalizers stay: one Update per Application less than the very first pass).
func (p *placementBench) unplace(b *testing.B) {
	if err := p.c.DeleteAllOf(p.ctx, &kustomizev1.Kustomization{}, client.InNamespace(benchClusterNamespace)); err != nil {
		b.Fatal(err)
	}
	p.await(b, "the Kustomizations' deletion", func() (bool, error) {
		l := &kustomizev1.KustomizationList{}
		err := p.c.List(p.ctx, l)
		return len(l.Items) == 0, err
	})
	for _, req := range p.apps {
		app := &appsv1alpha1.Application{}
		if err := p.api.Get(p.ctx, req.NamespacedName, app); err != nil {
			b.Fatal(err)
		}
		app.Status = appsv1alpha1.ApplicationStatus{}
		if err := p.c.Status().Update(p.ctx, app); err != nil {
			b.Fatal(err)
		}
	}
	p.awaitApplications(b)
	p.placed = false
}

// flux plays kustomize-controller: every Kustomization Ready for its generation, written in
// parallel (the setup of a case, not what is measured).
func (p *placementBench) flux(b *testing.B) {
	want := len(p.apps) * p.clusters
	var l kustomizev1.KustomizationList
	p.await(b, "the Kustomizations", func() (bool, error) {
		err := p.c.List(p.ctx, &l)
		return len(l.Items) == want, err
	})
	g, ctx := errgroup.WithContext(p.ctx)
	g.SetLimit(8)
	for i := range l.Items {
		k := &l.Items[i]
		g.Go(func() error {
			for {
				k.Status.ObservedGeneration = k.Generation
				apimeta.SetStatusCondition(&k.Status.Conditions, metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionTrue,
					Reason: "ReconciliationSucceeded", Message: "Applied revision", ObservedGeneration: k.Generation})
				err := p.c.Status().Update(ctx, k)
				if !apierrors.IsConflict(err) {
					return err
				}
				if err := p.api.Get(ctx, client.ObjectKeyFromObject(k), k); err != nil {
					return err
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	p.await(b, "the Kustomizations Ready", func() (bool, error) {
		err := p.c.List(p.ctx, &l)
		for i := range l.Items {
			if c := apimeta.FindStatusCondition(l.Items[i].Status.Conditions, meta.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
				return false, err
			}
		}
		return len(l.Items) == want, err
	})
}

// awaitApplications waits until the cache holds every Application as the API server does: the
// reconciler writes a status from what it read there, and a stale one is a conflict.
func (p *placementBench) awaitApplications(b *testing.B) {
	p.await(b, "the Applications", func() (bool, error) {
		cached, live := &appsv1alpha1.ApplicationList{}, &appsv1alpha1.ApplicationList{}
		if err := p.c.List(p.ctx, cached); err != nil {
			return false, err
		}
		if err := p.api.List(p.ctx, live); err != nil {
			return false, err
		}
		rv := map[string]string{}
		for _, a := range cached.Items {
			rv[a.Name] = a.ResourceVersion
		}
		for _, a := range live.Items {
			if rv[a.Name] != a.ResourceVersion {
				return false, nil
			}
		}
		return len(cached.Items) == len(live.Items), nil
	})
}

// await polls until the cache has caught up.
func (p *placementBench) await(b *testing.B, what string, done func() (bool, error)) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		ok, err := done()
		if err != nil {
			b.Fatalf("wait for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the cache did not catch up with %s in 10 minutes", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// meter adds up the process's CPU time over the ops and samples the live heap while they run
// (runtime/metrics: no stop of the world).
type meter struct {
	cpu  time.Duration
	peak uint64
	stop func()
}

func (m *meter) start() {
	var wg sync.WaitGroup
	quit := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			m.peak = max(m.peak, heapLive())
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	cpu := cpuTime()
	m.stop = func() {
		m.cpu += cpuTime() - cpu
		close(quit)
		wg.Wait()
	}
}

// cpuTime is the CPU time of the process so far, user and system.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapLive is the bytes of the heap's objects, live or not yet swept.
func heapLive() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
