package progress

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
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
	var err error
	c := s.Cluster.Client
	if obs.Units, err = readiness.ReadUnits(ctx, c, names.Namespace); err != nil {
		return obs, err
	}
	if s.Revisions {
		obs.Revisions = map[string]revisions.Revision{}
		rd := revisions.NewReader(c)
		for unit, ks := range obs.Units.Kustomizations {
			obs.Revisions[unit] = rd.Of(ctx, ks)
		}
	}

	hr := &helmv2.HelmRelease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: names.Release}, hr); err == nil {
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
	} else if !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err) {
		return obs, fmt.Errorf("read HelmRelease %s: %w", names.Release, err)
	} else {
		obs.Release = "release " + names.Release + ": not created yet"
	}

	if obs.Graph == nil || s.ClusterName == "" {
		return obs, nil
	}
	var v *machines.View
	for _, role := range units.ClusterRoles() {
		u, ok := obs.Graph.ByRole(role)
		if !ok {
			continue
		}
		if v == nil {
			read, err := machines.Read(ctx, c, names.Namespace, s.ClusterName)
			if err != nil {
				return obs, err
			}
			v = &read
		}
		obs.Details[u.Name] = v.Lines()
	}
	return obs, nil
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
