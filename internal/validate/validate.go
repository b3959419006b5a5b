// Package validate checks an environment offline, in every context it runs in: its values against
// the umbrella chart's schema, the chart's own checks (unit graph, providers), the build of every
// enabled unit, and every resulting object against the schemas of the vendored components.
package validate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/rbacrules"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/schemas"
	"cluster-init.dev/cluster-init/internal/values"
	"cluster-init.dev/cluster-init/internal/workloads"
)

// Target is one way an environment is rendered.
type Target struct {
	Name    string
	Context string
	// State is the state of the cluster the release runs in (managementstate).
	State []values.Layer
}

// Targets are the releases an environment becomes: it runs in the bootstrap cluster, then in the
// management cluster before and after the pivot (and after the pivot, from git, each workload
// cluster committed to the repository is a release of its own: see Environment).
func Targets() []Target {
	return []Target{
		{Name: render.ContextBootstrap, Context: render.ContextBootstrap},
		{Name: "management (before pivot)", Context: render.ContextManagement},
		{Name: "management (after pivot)", Context: render.ContextManagement,
			State: []values.Layer{managementstate.State{SelfManaged: true}.Layer()}},
	}
}

// AdoptedTargets is the one release an environment becomes when an existing cluster is adopted as
// its management cluster (bootstrap --adopt): the management context that defines no cluster of
// its own (and its workload clusters from git).
func AdoptedTargets() []Target {
	return []Target{{Name: "management (adopted)", Context: render.ContextManagement,
		State: []values.Layer{managementstate.State{Adopted: true}.Layer()}}}
}

// Report sums up one validated target.
type Report struct {
	Target  string
	Context string
	Units   int
	Objects int
	// Unread says why the target was not validated (a tenant's own repository not at hand).
	Unread string
	// Problems counts what is wrong in this target (0: valid).
	Problems int
	// Result is the target's render.
	Result *render.Result
}

// Environment validates an environment in each of its targets, rendered by r; base gives the
// environment, extra values layers and the source. With a git source, the workload clusters
// committed to the checkout at repoRoot are validated too: each as the admission policy of the
// management cluster will see it, then as its release. The error lists every problem.
func Environment(ctx context.Context, r *render.Renderer, repoRoot string, base render.Options) ([]Report, error) {
	return EnvironmentAs(ctx, r, repoRoot, base, Targets(), nil)
}

// EnvironmentAs is Environment for the given targets. tenantCheckouts (namespace -> directory)
// are checkouts of the tenants' own repositories, validated against the platform's rules.
func EnvironmentAs(ctx context.Context, r *render.Renderer, repoRoot string, base render.Options, targets []Target, tenantCheckouts map[string]string) ([]Report, error) {
	s, err := NewSchemas(ctx, r)
	if err != nil {
		return nil, err
	}
	return s.EnvironmentAs(ctx, r, repoRoot, base, targets, tenantCheckouts)
}

// Schemas are what every environment of a checkout is validated against before its own CRDs:
// the built-in types and the vendored components' CRDs. Made once, they serve environments
// validated side by side (validate --all).
type Schemas struct {
	validator *schemas.Validator
}

// NewSchemas learns the built-in types and the CRDs of the components r vendors.
func NewSchemas(ctx context.Context, r *render.Renderer) (*Schemas, error) {
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
	return &Schemas{validator: validator}, nil
}

// EnvironmentAs is the package's EnvironmentAs against these schemas; it may run beside other
// calls on the same Schemas.
func (s *Schemas) EnvironmentAs(ctx context.Context, r *render.Renderer, repoRoot string, base render.Options, targets []Target, tenantCheckouts map[string]string) ([]Report, error) {
	validator := s.validator.Clone()
	var reports []Report
	var problems findings
	var afterPivot *render.Result
	for _, t := range targets {
		opts := base
		opts.Context = t.Context
		opts.State = append(append([]values.Layer{}, base.State...), t.State...)
		res, err := r.Render(ctx, opts)
		if err != nil {
			var ps values.Problems
			if errors.As(err, &ps) {
				// Values problems are the same in every target: report them once.
				return reports, err
			}
			problems.add(t.Name, err.Error())
			continue
		}
		before := problems.count(t.Name)
		var objs []*unstructured.Unstructured
		for _, o := range res.Objects {
			objs = append(objs, o.Object)
		}
		if err := validator.AddCRDs(objs); err != nil {
			problems.add(t.Name, err.Error())
		}
		for _, o := range res.Objects {
			for _, e := range validator.Validate(ctx, o.Object) {
				problems.add(t.Name, fmt.Sprintf("%s%s: %s: %v", valuesOrigin(res, o, e), describe(o), objectName(o.Object), e))
			}
		}
		reports = append(reports, Report{Target: t.Name, Context: t.Context, Units: len(res.Graph.Order), Objects: len(res.Objects), Problems: problems.count(t.Name) - before, Result: res})
		if len(t.State) > 0 {
			afterPivot = res
		}
	}
	if len(tenantCheckouts) > 0 && (afterPivot == nil || afterPivot.Settings.Source.Type != "git") {
		kind := "none after the pivot"
		if afterPivot != nil {
			kind = fmt.Sprintf("%q", afterPivot.Settings.Source.Type)
		}
		problems.add("", fmt.Sprintf("--tenant %s: the environment's source is %s: its management cluster reads no tenant's directory (the tenants' directories are read from git): expected --tenant only for an environment with source.type git",
			strings.Join(slices.Sorted(maps.Keys(tenantCheckouts)), ", "), kind))
	}
	if afterPivot != nil {
		wl, clusters := workloadClusters(ctx, r, repoRoot, tenantCheckouts, afterPivot, validator, &problems)
		reports = append(reports, wl...)
		management := names.Namespace + "/" + afterPivot.Settings.Cluster.Name
		applications(ctx, repoRoot, afterPivot, append([]string{management}, clusters...), validator, &problems)
	}
	return reports, problems.err()
}

// valuesOrigin names the values file, line and key a problem of a unit's Flux object comes from
// ("env/values.yaml:12: units.capi.kustomization_spec.prune: "), when the user set that key:
// the chart copies units.NAME.kustomization_spec (helmrelease_spec) into the unit's object.
func valuesOrigin(res *render.Result, o render.Object, e error) string {
	var fe *field.Error
	if o.Origin != render.UmbrellaChart || !errors.As(e, &fe) {
		return ""
	}
	spec := map[string]string{"Kustomization": "kustomization_spec", "HelmRelease": "helmrelease_spec"}[o.Object.GetKind()]
	name, ok := strings.CutPrefix(fe.Field, "spec.")
	if spec == "" || !ok {
		return ""
	}
	unit := ""
	for _, u := range res.Graph.Units {
		if u.Object == o.Object.GetName() {
			unit = u.Name
		}
	}
	if unit == "" {
		return ""
	}
	var ps values.Problems
	if err := render.UnitProblem(res.Layers, unit, spec, e, strings.Split(name, ".")...); errors.As(err, &ps) {
		return fmt.Sprintf("%s: %s: ", ps[0].Origin, ps[0].Key)
	}
	return ""
}

// findings are the problems of all targets. A problem that several targets share (the values
// are the same in every context, so most are) is reported once, naming them all.
type findings struct {
	messages []string
	targets  map[string][]string
	byTarget map[string]int
}

func (f *findings) add(target, message string) {
	if f.targets == nil {
		f.targets, f.byTarget = map[string][]string{}, map[string]int{}
	}
	if _, ok := f.targets[message]; !ok {
		f.messages = append(f.messages, message)
	}
	f.targets[message] = append(f.targets[message], target)
	f.byTarget[target]++
}

func (f *findings) count(target string) int { return f.byTarget[target] }

func (f *findings) err() error {
	if len(f.messages) == 0 {
		return nil
	}
	lines := make([]string, len(f.messages))
	for i, m := range f.messages {
		targets := f.targets[m]
		if targets[0] == "" {
			lines[i] = m
			continue
		}
		lines[i] = strings.Join(targets, ", ") + ": " + m
	}
	return errors.New(strings.Join(lines, "\n"))
}

// workloadClusters validates the workload clusters the management cluster will read from the
// checkout.
func workloadClusters(ctx context.Context, r *render.Renderer, repoRoot string, tenantCheckouts map[string]string, management *render.Result, validator *schemas.Validator, problems *findings) ([]Report, []string) {
	plan, err := workloads.Read(ctx, repoRoot, management, tenantCheckouts)
	if err != nil {
		problems.add("workload clusters", err.Error())
		return nil, nil
	}
	var reports []Report
	objs := make([]*unstructured.Unstructured, len(management.Objects))
	for i, o := range management.Objects {
		objs[i] = o.Object
	}
	rules := map[*workloads.Tenant]rbacrules.Rules{}
	for _, o := range plan.Others {
		t := o.Tenant
		account, _, _ := unstructured.NestedString(t.Kustomization.Object, "spec", "serviceAccountName")
		if _, ok := rules[t]; !ok {
			rules[t] = rbacrules.Of(objs, t.Namespace, account)
		}
		if why := refusedWrite(validator, rules[t], fmt.Sprintf("the tenant's account (ServiceAccount %s/%s)", t.Namespace, account), o.Object); why != "" {
			where := strings.TrimPrefix(t.Path, "./")
			if o.File != "" {
				where = fmt.Sprintf("%s:%d", o.File, o.Line)
			}
			problems.add("tenant "+t.Namespace, fmt.Sprintf("%s: %s %s: %s: kustomize-controller would apply none of the directory, and every workload cluster of the tenant would stop changing; expected HelmReleases of workload clusters only", where, o.Object.GetKind(), o.Object.GetName(), why))
		}
	}
	for _, t := range plan.Tenants {
		if t.Checkout == "" {
			reports = append(reports, Report{Target: "tenant " + t.Namespace, Context: render.ContextWorkload,
				Unread: fmt.Sprintf("its clusters are in its own repository %s: not read (--tenant %s=DIR validates a checkout of it)", t.Repository, t.Namespace)})
		}
	}
	var clusters []string
	for _, c := range plan.Clusters {
		clusters = append(clusters, c.Tenant.Namespace+"/"+c.Name)
		target := "workload cluster " + c.Tenant.Namespace + "/" + c.Name
		// As the API server takes the HelmRelease: its metadata and its CRD's schema.
		if errs := validator.Validate(ctx, c.Release); len(errs) > 0 {
			for _, e := range errs {
				problems.add(target, fmt.Sprintf("%s: HelmRelease %s: %v", c.File, c.Name, e))
			}
			continue
		}
		if err := plan.Admit(c); err != nil {
			problems.add(target, err.Error())
			continue
		}
		res, err := plan.Render(ctx, r, c)
		if err != nil {
			var ps values.Problems
			if errors.As(err, &ps) {
				problems.add("", ps.Error()) // names its files itself
			} else {
				problems.add(target, fmt.Sprintf("(%s) %v", c.File, err))
			}
			continue
		}
		before := problems.count(target)
		for _, o := range res.Objects {
			for _, e := range validator.Validate(ctx, o.Object) {
				problems.add(target, fmt.Sprintf("%s: %s: %v", describe(o), objectName(o.Object), e))
			}
		}
		reports = append(reports, Report{Target: target, Context: render.ContextWorkload, Units: len(res.Graph.Order), Objects: len(res.Objects), Problems: problems.count(target) - before, Result: res})
	}
	return reports, clusters
}

// refusedWrite says why the API server would refuse obj from the account with rules (named by
// account), or "": the account may write only what its Roles grant, and only kinds the API knows.
func refusedWrite(validator *schemas.Validator, rules rbacrules.Rules, account string, obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	resource, known := validator.Resource(gvk)
	if !known {
		return fmt.Sprintf("%s is no kind of the management cluster's API (neither built in nor defined by a CRD of its components)", gvk)
	}
	if rules.Allows(gvk.Group, resource, rbacrules.Writes...) {
		return ""
	}
	name := resource
	if gvk.Group != "" {
		name += "." + gvk.Group
	}
	return fmt.Sprintf("%s may write %s, not %s", account, rules.Writable(), name)
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
