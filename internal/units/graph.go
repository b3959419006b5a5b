// Package units reads the unit graph the umbrella chart resolved (the cluster-init-units
// ConfigMap it renders next to the Flux objects), so that the CLI shows exactly the graph Flux
// runs, and computes what the chart does not: dependents and the critical path.
package units

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/names"
)

// Unit is one unit as the chart resolved it.
type Unit struct {
	Name        string `json:"name"`
	Enabled     bool   `json:"enabled"`
	Reason      string `json:"reason"`
	Description string `json:"description"`
	// Help is what to look at when the unit blocks the bootstrap (the chart's info.help, for the
	// values it rendered with), shown in the conclusion.
	Help      string   `json:"help,omitempty"`
	Contexts  []string `json:"contexts"`
	DependsOn []string `json:"depends_on"`
	// AppliedDeps are the dependencies the unit waits for only until their objects are applied,
	// not until they are ready (their CRDs are what it needs, as clusterctl init installs the
	// providers together once cert-manager runs).
	AppliedDeps []string `json:"applied_deps,omitempty"`
	Dropped     []string `json:"dropped"`
	Kind        string   `json:"kind"` // KindKustomization or KindHelmRelease
	Path        string   `json:"path,omitempty"`
	Chart       string   `json:"chart,omitempty"`
	Kubeconfig  bool     `json:"kubeconfig"`
	Timeout     string   `json:"timeout"`
	// Object is the name of the unit's Flux Kustomization (the unit's name, but for a workload
	// cluster's release, which prefixes it with the release's).
	Object string `json:"object"`
	// Role is what the CLI and the pivot find the unit by (see the Role constants).
	Role string `json:"role,omitempty"`
	// SuspendForPivot: the pivot suspends the unit before it moves the definitions.
	SuspendForPivot bool `json:"suspend_for_pivot,omitempty"`
}

// NeedsOnlyApplied says whether the unit waits for dependency dep only until its objects are
// applied (one of its AppliedDeps), not until it is ready.
func (u *Unit) NeedsOnlyApplied(dep string) bool { return slices.Contains(u.AppliedDeps, dep) }

// The kinds of unit: how the chart renders it.
const (
	KindKustomization = "kustomization" // a Flux Kustomization of a path of the source
	KindHelmRelease   = "helmrelease"   // a HelmRelease of a chart of the source, wrapped in a Kustomization
)

// The roles a unit can play (`role` of a unit in the chart's values): the CLI and the pivot find
// units by role, the chart names them.
const (
	RoleRelease = "release" // the cluster-init HelmRelease and its source
	RoleCluster = "cluster" // the cluster definitions
	// RoleClusterReady is the gate that waits until every machine of the cluster is up.
	RoleClusterReady = "cluster-ready"
	RolePivot        = "pivot" // the pivot Job
	// RoleEnvironment builds the environment's directory of the source (values and decrypted
	// secrets): the environment itself, which the CLI loads and decrypts as the unit would.
	RoleEnvironment = "environment"
)

// Graph is every unit of a release, enabled or not.
type Graph struct {
	Context string
	Units   map[string]*Unit
	// Order lists the enabled units, each after its dependencies.
	Order []string
}

// FromConfigMap reads the graph from the chart's cluster-init-units ConfigMap.
func FromConfigMap(cm *unstructured.Unstructured) (*Graph, error) {
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	return FromData(data)
}

// FromData reads the graph from the data of the cluster-init-units ConfigMap.
func FromData(data map[string]string) (*Graph, error) {
	var raw struct {
		Units map[string]*Unit `json:"units"`
		Order []string         `json:"order"`
	}
	if err := json.Unmarshal([]byte(data["units.json"]), &raw); err != nil {
		return nil, fmt.Errorf("read unit graph from ConfigMap %s: %w", names.UnitsConfigMap, err)
	}
	for name, u := range raw.Units {
		u.Name = name
		if u.Object == "" {
			u.Object = name
		}
	}
	g := &Graph{Context: data["context"], Units: raw.Units, Order: raw.Order}
	for _, name := range g.Order {
		u, ok := g.Units[name]
		if !ok || !u.Enabled {
			return nil, fmt.Errorf("unit graph: %q is in the order but not an enabled unit", name)
		}
		for _, d := range u.DependsOn {
			if dep, ok := g.Units[d]; !ok || !dep.Enabled {
				return nil, fmt.Errorf("unit graph: %s depends on %q, which is not an enabled unit", name, d)
			}
		}
	}
	return g, nil
}

// Find locates the graph of a release among rendered objects.
func Find(objs []*unstructured.Unstructured, release string) (*Graph, error) {
	name := names.UnitsConfigMapOf(release)
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == name {
			return FromConfigMap(o)
		}
	}
	return nil, fmt.Errorf("unit graph: the chart rendered no ConfigMap %s", name)
}

// Enabled returns the enabled units in dependency order.
func (g *Graph) Enabled() []*Unit {
	out := make([]*Unit, 0, len(g.Order))
	for _, n := range g.Order {
		out = append(out, g.Units[n])
	}
	return out
}

// ClusterRoles are the roles of the units that wait for the cluster's machines: what those units
// wait for is the Cluster's conditions and its machines.
func ClusterRoles() []string { return []string{RoleCluster, RoleClusterReady} }

// ByRole returns the enabled unit that plays role, if any.
func (g *Graph) ByRole(role string) (*Unit, bool) {
	for _, n := range g.Order {
		if g.Units[n].Role == role {
			return g.Units[n], true
		}
	}
	return nil, false
}

// SuspendedForPivot returns the enabled units the pivot suspends, in order.
func (g *Graph) SuspendedForPivot() []*Unit {
	var out []*Unit
	for _, u := range g.Enabled() {
		if u.SuspendForPivot {
			out = append(out, u)
		}
	}
	return out
}

// DependsOnTransitively returns the enabled units that depend on name, directly or not, in order.
func (g *Graph) DependsOnTransitively(name string) []string {
	waiting := map[string]bool{name: true}
	var out []string
	for _, n := range g.Order { // dependencies come first
		for _, d := range g.Units[n].DependsOn {
			if waiting[d] && !waiting[n] {
				waiting[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// DependenciesOf returns the enabled units name depends on, directly or not, in order.
func (g *Graph) DependenciesOf(name string) []string {
	needed := map[string]bool{}
	var visit func(string)
	visit = func(n string) {
		u, ok := g.Units[n]
		if !ok {
			return
		}
		for _, d := range u.DependsOn {
			if !needed[d] {
				needed[d] = true
				visit(d)
			}
		}
	}
	visit(name)
	var out []string
	for _, n := range g.Order {
		if needed[n] {
			out = append(out, n)
		}
	}
	return out
}

// Names returns every unit name, sorted.
func (g *Graph) Names() []string {
	names := make([]string, 0, len(g.Units))
	for n := range g.Units {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Dependents returns the enabled units that depend directly on name.
func (g *Graph) Dependents(name string) []string {
	var out []string
	for _, n := range g.Order {
		for _, d := range g.Units[n].DependsOn {
			if d == name {
				out = append(out, n)
			}
		}
	}
	return out
}

// Edges returns every dependency edge between enabled units as "unit -> dependency".
func (g *Graph) Edges() []string {
	var out []string
	for _, n := range g.Order {
		for _, d := range g.Units[n].DependsOn {
			out = append(out, n+" -> "+d)
		}
	}
	sort.Strings(out)
	return out
}

// CriticalPath returns the longest chain of dependencies, weighted by weight (a unit's expected
// or measured duration; 1 for every unit gives the deepest chain). The path goes from a unit
// without dependencies to the last unit to finish.
func (g *Graph) CriticalPath(weight func(*Unit) float64) []string {
	finish := map[string]float64{}
	prev := map[string]string{}
	for _, n := range g.Order { // dependencies come first
		u := g.Units[n]
		start := 0.0
		for _, d := range u.DependsOn {
			if _, set := prev[n]; !set || finish[d] > start {
				start = finish[d]
				prev[n] = d
			}
		}
		finish[n] = start + weight(u)
	}
	last := ""
	for _, n := range g.Order {
		if last == "" || finish[n] > finish[last] {
			last = n
		}
	}
	var path []string
	for n := last; n != ""; n = prev[n] {
		path = append([]string{n}, path...)
	}
	return path
}

// DependentsFirst orders a dependency graph (name -> its dependencies) for deletion: batches of
// names no remaining one depends on, each sorted. A cycle (which the chart refuses) ends in one last batch.
func DependentsFirst(deps map[string][]string) [][]string {
	left := map[string]bool{}
	for n := range deps {
		left[n] = true
	}
	var batches [][]string
	for len(left) > 0 {
		needed := map[string]bool{}
		for n := range left {
			for _, d := range deps[n] {
				needed[d] = true
			}
		}
		var batch []string
		for n := range left {
			if !needed[n] {
				batch = append(batch, n)
			}
		}
		if len(batch) == 0 {
			for n := range left {
				batch = append(batch, n)
			}
		}
		sort.Strings(batch)
		for _, n := range batch {
			delete(left, n)
		}
		batches = append(batches, batch)
	}
	return batches
}
