package bootstrap

import (
	"context"
	"time"

	"cluster-init.dev/cluster-init/internal/handoff"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/units"
)

// managementLookTimeout bounds one look at the management cluster: it must never hold up the
// observation of the bootstrap cluster's units.
const managementLookTimeout = 2 * time.Second

// managementUnits hands the units of the management cluster over to its Flux while the bootstrap
// prepares it (its providers install while its workers join, and the pivot waits for them): its
// Flux re-checks a waiting unit only every 5 s and nobody else watches it until the pivot runs,
// which then hands them over itself.
type managementUnits struct {
	bootstrap *kube.Cluster
	name      string // the cluster's name, which names its kubeconfig Secret
	cluster   *kube.Cluster
	handoffs  *handoff.Requester
	health    *handoff.HealthChecks
	done      bool
}

func newManagementUnits(bootstrap *kube.Cluster, name string) *managementUnits {
	return &managementUnits{bootstrap: bootstrap, name: name}
}

// look hands over what is ready in the management cluster, from the moment the bootstrap
// cluster's definitions unit is ready (the management API server answers) until the pivot starts.
// Failures are left for the next look: this only saves time.
func (m *managementUnits) look(ctx context.Context, u readiness.Units) {
	if m.done || u.Graph == nil {
		return
	}
	pivotUnit, ok := u.Graph.ByRole(units.RolePivot)
	if !ok {
		m.done = true
		return
	}
	if st := u.Status(pivotUnit.Name); st.State != readiness.Pending {
		m.stop()
		return
	}
	clusterUnit, ok := u.Graph.ByRole(units.RoleCluster)
	if !ok || !u.Status(clusterUnit.Name).Done() {
		return
	}
	run := ctx
	ctx, cancel := context.WithTimeout(ctx, managementLookTimeout)
	defer cancel()
	if m.cluster == nil {
		c, err := kube.ClusterAPICluster(ctx, m.bootstrap.Client, names.Namespace, m.name)
		if err != nil {
			return
		}
		m.cluster, m.handoffs = c, handoff.NewRequester(c.Client)
		// Its goroutines outlive one look: they end with the run or stop.
		m.health = handoff.NewHealthChecks(run, c)
	}
	mu, err := readiness.ReadUnits(ctx, m.cluster.Client, names.Namespace)
	if err != nil || mu.Graph == nil {
		return
	}
	if _, err := m.handoffs.Request(ctx, mu); err != nil {
		return
	}
	m.health.Follow(mu)
}

// stop ends the following for good.
func (m *managementUnits) stop() {
	if m.health != nil {
		m.health.Stop()
	}
	m.done = true
}
