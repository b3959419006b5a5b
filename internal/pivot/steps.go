package pivot

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/fluxobjects"
	"cluster-init.dev/cluster-init/internal/handoff"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/steps"
	"cluster-init.dev/cluster-init/internal/units"
)

// The steps, in the order of stepsOf.
const (
	StepSaveKubeconfig = "save-kubeconfig" // keep the management kubeconfig: its Secret moves away
	StepWaitReady      = "wait-ready"      // providers of the management cluster and all machines ready
	StepSuspend        = "suspend"         // the bootstrap cluster stops reconciling the definitions
	StepMove           = "move"            // clusterctl move of the namespace
	StepWake           = "wake"            // what does not notice the move reconciles again
	StepAdopt          = "adopt"           // the management cluster's release takes the definitions over
	StepVerify         = "verify"          // Cluster ready from the management side, no machine replaced
)

// StepNames lists the steps in order.
func StepNames() []string {
	var out []string
	for _, s := range (&pivot{}).steps(&State{}) {
		out = append(out, s.Name)
	}
	return out
}

// pivot is one attempt: the clusters and what the steps share.
type pivot struct {
	Options
	management *kube.Cluster
}

// steps are the steps of the pivot; what one learns for later ones it records in st, saved with
// the step.
func (p *pivot) steps(st *State) []steps.Step {
	var out []steps.Step
	for _, s := range []struct {
		name string
		run  func(context.Context, *State) error
	}{
		{StepSaveKubeconfig, p.saveKubeconfig},
		{StepWaitReady, p.waitReady},
		{StepSuspend, p.suspend},
		{StepMove, p.move},
		{StepWake, p.wake},
		{StepAdopt, p.adopt},
		{StepVerify, p.verify},
	} {
		out = append(out, steps.Step{Name: s.name, Run: func(ctx context.Context) error { return s.run(ctx, st) }})
	}
	return out
}

// saveKubeconfig copies the management kubeconfig out of the Cluster API Secret that moves with
// the cluster.
func (p *pivot) saveKubeconfig(ctx context.Context, st *State) error {
	// The pivot runs once the cluster is up: a Cluster that does not exist is a wrong name, which
	// no retry fixes.
	if err := p.Bootstrap.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Cluster}, &clusterv1.Cluster{}); apierrors.IsNotFound(err) {
		return Permanent(fmt.Errorf("no Cluster %s in namespace %s", p.Cluster, p.Namespace))
	} else if err != nil {
		return fmt.Errorf("read Cluster %s: %w", p.Cluster, err)
	}
	data, err := kubeconfig.FromSecret(ctx, p.Bootstrap.Client, client.ObjectKey{Namespace: p.Namespace, Name: p.Cluster})
	if err != nil {
		return fmt.Errorf("the kubeconfig of %s: %w", p.Cluster, err)
	}
	cp := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: names.PivotKubeconfig, Labels: names.Labels(false)},
		Data:       map[string][]byte{"value": data},
	}
	return serverSideApply(ctx, p.Bootstrap.Client, cp)
}

// connect connects to the management cluster with the kubeconfig saveKubeconfig kept.
func (p *pivot) connect(ctx context.Context) (*kube.Cluster, error) {
	if p.management != nil {
		return p.management, nil
	}
	m, err := SavedManagement(ctx, p.Bootstrap.Client, p.Namespace)
	if err != nil {
		return nil, err
	}
	p.management = m
	return m, nil
}

// SavedManagement connects to the management cluster with the copy of its kubeconfig the pivot
// keeps in the bootstrap cluster's namespace: the Cluster API one moves with the definitions.
func SavedManagement(ctx context.Context, bootstrap client.Reader, namespace string) (*kube.Cluster, error) {
	return kube.KubeconfigSecret{Namespace: namespace, Name: names.PivotKubeconfig, Key: "value"}.Connect(ctx, bootstrap, "management")
}

// waitFor polls check until it is done, logging every new reason it gives. Errors reading the
// clusters are retried until the step's timeout; a permanent failure ends the wait at once.
func (p *pivot) waitFor(ctx context.Context, what string, check func(context.Context) (done bool, reason string, err error)) error {
	last := ""
	err := wait.PollUntilContextTimeout(ctx, p.Interval, p.StepTimeout, true, func(ctx context.Context) (bool, error) {
		done, reason, err := check(ctx)
		if IsPermanent(err) {
			return false, err
		}
		if err != nil {
			reason = err.Error()
		}
		if !done && reason != last {
			p.Log("  waiting for %s: %s", what, reason)
			last = reason
		}
		return done, nil
	})
	if err != nil && !IsPermanent(err) {
		return fmt.Errorf("%s: not done after %s: %s", what, p.StepTimeout, last)
	}
	return err
}

// waitReady waits until every machine of the cluster is ready (from the bootstrap side) and every
// unit of the management cluster's release is (its providers, so that it can take over).
func (p *pivot) waitReady(ctx context.Context, st *State) error {
	if err := p.waitFor(ctx, "the machines of "+p.Cluster, func(ctx context.Context) (bool, string, error) {
		v, err := machines.Read(ctx, p.Bootstrap.Client, p.Namespace, p.Cluster)
		if err != nil {
			return false, "", err
		}
		if !v.Available {
			return false, "Cluster " + p.Cluster + " is not Available yet", nil
		}
		if ok, pending := v.Settled(); !ok {
			return false, fmt.Sprint(pending), nil
		}
		st.ProviderIDs = v.ProviderIDs()
		return true, "", nil
	}); err != nil {
		return err
	}
	m, err := p.connect(ctx)
	if err != nil {
		return err
	}
	health := handoff.NewHealthChecks(ctx, m)
	defer health.Stop()
	return p.waitFor(ctx, "the units of the management cluster", p.unitsDone(m, health, nil))
}

// unitsDone checks whether every unit of the management cluster is done (and, if want is set,
// whether want accepts the graph), handing each unit over to Flux as soon as its dependencies are
// ready and its health check as soon as its objects are: these waits are on the critical path of
// the bootstrap.
func (p *pivot) unitsDone(m *kube.Cluster, health *handoff.HealthChecks, want func(*units.Graph) string) func(context.Context) (bool, string, error) {
	handoffs := handoff.NewRequester(m.Client)
	return func(ctx context.Context) (bool, string, error) {
		u, err := readiness.ReadUnits(ctx, m.Client, p.Namespace)
		if err != nil {
			return false, "", err
		}
		if _, err := handoffs.Request(ctx, u); err != nil {
			return false, "", err
		}
		health.Follow(u)
		if want != nil {
			if reason := want(u.Graph); reason != "" {
				return false, reason, nil
			}
		}
		done, reason := u.Done()
		return done, reason, nil
	}
}

// suspend stops the bootstrap cluster's units that reconcile the definitions or reach the new
// cluster through the Secret that moves (the chart marks them suspend_for_pivot), and the
// HelmReleases that would re-create what moves: the release itself and those of these units.
func (p *pivot) suspend(ctx context.Context, st *State) error {
	u, err := readiness.ReadUnits(ctx, p.Bootstrap.Client, p.Namespace)
	if err != nil {
		return err
	}
	if u.Graph == nil {
		return Permanent(errors.New("the bootstrap cluster has no unit graph"))
	}
	releases := []string{names.Release}
	for _, unit := range u.Graph.SuspendedForPivot() {
		if unit.Kind == units.KindHelmRelease {
			releases = append(releases, unit.Name)
		}
	}
	for _, name := range releases {
		if err := fluxobjects.Suspend(ctx, p.Bootstrap.Client, &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name}}); err != nil {
			return err
		}
	}
	for _, unit := range u.Graph.SuspendedForPivot() {
		if err := fluxobjects.Suspend(ctx, p.Bootstrap.Client, &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: unit.Name}}); err != nil {
			return fmt.Errorf("unit %s: %w", unit.Name, err)
		}
	}
	return nil
}

// adopt makes the management cluster's release render the cluster definitions: it records
// self_managed (and a restore's hold of the tenants) in the state ConfigMap its HelmRelease reads, and waits until the unit of the
// definitions and every other unit there are ready.
func (p *pivot) adopt(ctx context.Context, st *State) error {
	m, err := p.connect(ctx)
	if err != nil {
		return err
	}
	// A restore holds the tenants from the first render that has them (bootstrap restore writes
	// the hold in the bootstrap cluster before its release): the backup's clusters go in first.
	held, _, err := managementstate.Read(ctx, p.Bootstrap.Client)
	if err != nil {
		return err
	}
	if err := managementstate.Update(ctx, m.Client, names.FieldManager+"-pivot", func(st *managementstate.State) {
		st.SelfManaged, st.HoldTenants = true, held.HoldTenants
	}); err != nil {
		return err
	}
	health := handoff.NewHealthChecks(ctx, m)
	defer health.Stop()
	return p.waitFor(ctx, "the management cluster to reconcile its own definitions", p.unitsDone(m, health, func(g *units.Graph) string {
		if g == nil {
			return "no unit graph yet"
		}
		if _, ok := g.ByRole(units.RoleCluster); !ok {
			return "the release does not render the definitions yet"
		}
		return ""
	}))
}

// verify checks from the management side that the cluster is available with the same machines,
// and that nothing of it is left in the bootstrap cluster.
func (p *pivot) verify(ctx context.Context, st *State) error {
	m, err := p.connect(ctx)
	if err != nil {
		return err
	}
	return p.waitFor(ctx, "the cluster seen from the management cluster", func(ctx context.Context) (bool, string, error) {
		v, err := machines.Read(ctx, m.Client, p.Namespace, p.Cluster)
		if err != nil {
			return false, "", err
		}
		if !v.Found {
			return false, "", Permanent(fmt.Errorf("the management cluster does not hold Cluster %s after the move", p.Cluster))
		}
		if replaced := machines.Replaced(st.ProviderIDs, v.ProviderIDs()); len(replaced) > 0 {
			return false, "", Permanent(fmt.Errorf("machines replaced during the pivot: %v", replaced))
		}
		if ok, pending := v.Settled(); !ok || !v.Available {
			return false, fmt.Sprintf("available %t, %v", v.Available, pending), nil
		}
		left := &clusterv1.ClusterList{}
		if err := p.Bootstrap.Client.List(ctx, left, client.InNamespace(p.Namespace)); err != nil {
			return false, "", err
		}
		if len(left.Items) > 0 {
			return false, "", Permanent(fmt.Errorf("Cluster %s is still in the bootstrap cluster after the move", p.Cluster))
		}
		return true, "", nil
	})
}

// waitInterval is how often the waits of the steps look: each wait is on the critical path of the
// bootstrap, and a look is a few reads.
const waitInterval = time.Second
