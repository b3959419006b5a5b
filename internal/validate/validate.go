// Package validate checks an environment offline, in every context it runs in: its values against
// the umbrella chart's schema, the chart's own checks (unit graph, providers), the build of every
// enabled unit, and every resulting object against the schemas of the vendored components.
package validate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/schemas"
	"cluster-init.dev/cluster-init/internal/values"
	"cluster-init.dev/cluster-init/internal/workloads"
)

// Target is one way an environment is rendered.
type Target struct {
	Name      string
	Context   string
	Overrides []values.Layer
}

// Targets are the releases an environment becomes: it runs in the bootstrap cluster, then in the
// management cluster before and after the pivot (and after the pivot, from git, each workload
// cluster committed to the repository is a release of its own: see Environment).
func Targets() []Target {
	return []Target{
		{Name: render.ContextBootstrap, Context: render.ContextBootstrap},
		{Name: "management (before pivot)", Context: render.ContextManagement},
		{Name: "management (after pivot)", Context: render.ContextManagement,
			Overrides: []values.Layer{render.SelfManaged()}},
	}
}

// Report sums up one validated target.
type Report struct {
	Target  string
	Context string
	Units   int
	Objects int
	// Result is the target's render.
	Result *render.Result
}

// Environment validates an environment in each of its targets, rendered by r; base gives the
// environment, extra values layers and the source. With a git source, the workload clusters
// committed to the checkout at repoRoot are validated too: each as the admission policy of the
// management cluster will see it, then as its release. The error lists every problem.
func Environment(ctx context.Context, r *render.Renderer, repoRoot string, base render.Options) ([]Report, error) {
	validator, err := schemas.New()
	if err != nil {
		return nil, err
	}
	vendored, err := r.VendoredObjects(ctx)
	if err != nil {
		return nil, err
	}
	if err := validator.AddCRDs(vendored); err != nil {
		return nil, fmt.Errorf("vendored CRDs: %w", err)
	}

	var reports []Report
	var problems []string
	var afterPivot *render.Result
	for _, t := range Targets() {
		opts := base
		opts.Context = t.Context
		opts.Overrides = append(append([]values.Layer{}, base.Overrides...), t.Overrides...)
		res, err := r.Render(ctx, opts)
		if err != nil {
			var ps values.Problems
			if errors.As(err, &ps) {
				// Values problems are the same in every target: report them once.
				return reports, err
			}
			problems = append(problems, fmt.Sprintf("%s: %v", t.Name, err))
			continue
		}
		var objs []*unstructured.Unstructured
		for _, o := range res.Objects {
			objs = append(objs, o.Object)
		}
		if err := validator.AddCRDs(objs); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", t.Name, err))
		}
		for _, o := range res.Objects {
			for _, e := range validator.Validate(ctx, o.Object) {
				problems = append(problems, fmt.Sprintf("%s: %s: %s: %v", t.Name, describe(o), objectName(o.Object), e))
			}
		}
		reports = append(reports, Report{Target: t.Name, Context: t.Context, Units: len(res.Graph.Order), Objects: len(res.Objects), Result: res})
		if len(t.Overrides) > 0 {
			afterPivot = res
		}
	}
	if afterPivot != nil {
		wl, wlProblems := workloadClusters(ctx, r, repoRoot, afterPivot, validator)
		reports = append(reports, wl...)
		problems = append(problems, wlProblems...)
	}
	if len(problems) > 0 {
		return reports, errors.New(strings.Join(problems, "\n"))
	}
	return reports, nil
}

// workloadClusters validates the workload clusters the management cluster will read from the
// checkout.
func workloadClusters(ctx context.Context, r *render.Renderer, repoRoot string, management *render.Result, validator *schemas.Validator) ([]Report, []string) {
	plan, err := workloads.Read(ctx, repoRoot, management)
	if err != nil {
		return nil, []string{"workload clusters: " + err.Error()}
	}
	var reports []Report
	var problems []string
	for _, c := range plan.Clusters {
		target := "workload cluster " + c.Tenant.Namespace + "/" + c.Name
		if err := plan.Admit(c); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", target, err))
			continue
		}
		res, err := plan.Render(ctx, r, repoRoot, c)
		if err != nil {
			var ps values.Problems
			if errors.As(err, &ps) {
				problems = append(problems, ps.Error())
			} else {
				problems = append(problems, fmt.Sprintf("%s (%s): %v", target, c.File, err))
			}
			continue
		}
		for _, o := range res.Objects {
			for _, e := range validator.Validate(ctx, o.Object) {
				problems = append(problems, fmt.Sprintf("%s: %s: %s: %v", target, describe(o), objectName(o.Object), e))
			}
		}
		reports = append(reports, Report{Target: target, Context: render.ContextWorkload, Units: len(res.Graph.Order), Objects: len(res.Objects), Result: res})
	}
	return reports, problems
}

func describe(o render.Object) string {
	if o.Unit != "" {
		return "unit " + o.Unit + " (" + o.Origin + ")"
	}
	return o.Origin
}

func objectName(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), ns, o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}
