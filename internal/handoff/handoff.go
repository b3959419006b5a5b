// Package handoff starts a unit the moment its dependencies are ready, and ends its health check
// the moment its objects are (health.go). Flux re-checks a unit that waits for a dependency every
// --requeue-dependency (5s in a cluster that stays), so each level of the unit graph would cost
// half of that on average; whoever watches the units anyway (the CLI, the pivot) asks Flux to
// reconcile the units it sees unblocked, as `flux reconcile` does.
package handoff

import (
	"context"
	"fmt"
	"slices"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/fluxobjects"
	"cluster-init.dev/cluster-init/internal/readiness"
)

// Unblocked lists the units that wait for their dependencies although every one of them is ready
// (or, for a dependency the unit needs applied only, applied): Flux has not looked again since.
func Unblocked(u readiness.Units) []string {
	if u.Graph == nil {
		return nil
	}
	var out []string
	for _, name := range u.Graph.Order {
		unit := u.Graph.Units[name]
		st := u.Status(name)
		if st.State != readiness.Pending || st.Reason != meta.DependencyNotReadyReason || len(unit.DependsOn) == 0 {
			continue
		}
		met := func(d string) bool {
			if u.Status(d).State == readiness.Ready {
				return true
			}
			// What the chart asks Flux to check for such a dependency (readyExpr in _unit.tpl).
			ks := u.Kustomizations[d]
			return unit.NeedsOnlyApplied(d) && ks != nil && ks.Status.Inventory != nil
		}
		if !slices.ContainsFunc(unit.DependsOn, func(d string) bool { return !met(d) }) {
			out = append(out, name)
		}
	}
	return out
}

// minGap is how long a unit asked to reconcile is left to do it before it is asked again (Flux may
// find a dependency not ready yet at the revision it wants).
const minGap = 5 * time.Second

// Requester asks Flux to reconcile unblocked units, each at most once per minGap.
type Requester struct {
	c     client.Client
	asked map[string]time.Time
	now   func() time.Time
}

// NewRequester asks through c.
func NewRequester(c client.Client) *Requester {
	return &Requester{c: c, asked: map[string]time.Time{}, now: time.Now}
}

// Request asks Flux to reconcile now the unblocked units of u and returns their names.
func (r *Requester) Request(ctx context.Context, u readiness.Units) ([]string, error) {
	var asked []string
	for _, name := range Unblocked(u) {
		ks := u.Kustomizations[name]
		now := r.now()
		if last, ok := r.asked[ks.Name]; ok && now.Sub(last) < minGap {
			continue
		}
		// Flux may have started it since the look (it re-checks waiting units too): a request
		// while it applies would interrupt the health check that follows.
		obj := &kustomizev1.Kustomization{}
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(ks), obj); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return asked, fmt.Errorf("read unit %s: %w", name, err)
			}
			continue
		}
		if st := readiness.OfUnit(obj); st.State != readiness.Pending || st.Reason != meta.DependencyNotReadyReason {
			continue
		}
		if _, err := fluxobjects.RequestReconcile(ctx, r.c, obj, now); client.IgnoreNotFound(err) != nil {
			return asked, fmt.Errorf("request a reconciliation of unit %s: %w", name, err)
		}
		r.asked[ks.Name] = now
		asked = append(asked, name)
	}
	return asked, nil
}
