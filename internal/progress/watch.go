package progress

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/revisions"
	"cluster-init.dev/cluster-init/internal/units"
	"cluster-init.dev/cluster-init/internal/values"
)

// Source says where to look for a release's units.
type Source struct {
	Cluster *kube.Cluster
	// ClusterName is the Cluster API cluster whose conditions and machines are shown under the
	// units that wait for it (units.ClusterRoles) while they reconcile.
	ClusterName string
	// Revisions: read which commit each unit runs, and what its source fetched.
	Revisions bool
}

// Observe looks at the cluster once.
func (s Source) Observe(ctx context.Context) (Observed, error) {
	obs := Observed{Details: map[string][]string{}}
	c := s.Cluster.Client
	// The units, the release and the cluster's machines side by side: a loaded API server's
	// latency is paid about once per look. The machines are read before the graph says whether
	// a unit shows them: a read to spare, not a round trip to wait for.
	var view machines.View
	var viewErr error // told only if a unit shows the machines
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		if obs.Units, err = readiness.ReadUnits(gctx, c, names.Namespace); err != nil {
			return err
		}
		if s.Revisions {
			obs.Revisions = map[string]revisions.Revision{}
			rd := revisions.NewReader(c)
			for unit, ks := range obs.Units.Kustomizations {
				obs.Revisions[unit] = rd.Of(gctx, ks)
			}
		}
		return nil
	})
	g.Go(func() error { return s.observeRelease(gctx, &obs) })
	if s.ClusterName != "" {
		g.Go(func() error {
			view, viewErr = machines.Read(gctx, c, names.Namespace, s.ClusterName)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return obs, err
	}
	if viewErr == nil {
		obs.Cluster = view
	}
	if obs.Graph == nil || s.ClusterName == "" {
		return obs, nil
	}
	for _, role := range units.ClusterRoles() {
		if u, ok := obs.Graph.ByRole(role); ok {
			if viewErr != nil {
				return obs, viewErr
			}
			obs.Details[u.Name] = view.Lines()
		}
	}
	return obs, nil
}

// observeRelease reads the cluster-init HelmRelease into obs: its state in a line and whether it fails.
func (s Source) observeRelease(ctx context.Context, obs *Observed) error {
	hr := &helmv2.HelmRelease{}
	err := s.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: names.Release}, hr)
	switch {
	case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
		obs.Release = "release " + names.Release + ": not created yet"
		return nil
	case err != nil:
		return fmt.Errorf("read HelmRelease %s: %w", names.Release, err)
	}
	// One line: Helm's refusals (a schema's, say) come on several, and name values by JSON
	// pointer, where the values files name them by key.
	obs.Release = strings.Join(strings.Fields(describeFlux(hr, "release "+names.Release)), " ")
	obs.Release = schemaPointer.ReplaceAllStringFunc(obs.Release, func(m string) string {
		return "at " + values.PointerKey(schemaPointer.FindStringSubmatch(m)[1])
	})
	// A release that fails keeps its units as it rendered them last: what it refuses (values
	// a commit brought, which its chart's version names) shows nowhere else.
	if st := readiness.Of(hr); st.State == readiness.Failed || st.Failing {
		obs.ReleaseFailing = true
		if rev := hr.Status.LastAttemptedRevision; rev != "" {
			obs.Release += " (chart " + rev + ")"
		}
	}
	return nil
}

// schemaPointer is how Helm's schema validation names a value: "at '/cluster/workers/replicas'".
var schemaPointer = regexp.MustCompile(`at '(/[^']*)'`)

// describeFlux is a Flux object's status in a line: ready, or what Flux says of it.
func describeFlux[T readiness.FluxObject](obj T, what string) string {
	st := readiness.Of(obj)
	switch {
	case st.State == readiness.Ready:
		return what + ": ready"
	case st.Reason == "":
		return what + ": " + st.Message
	default:
		return fmt.Sprintf("%s: %s: %s", what, st.Reason, st.Message)
	}
}
