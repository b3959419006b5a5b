// Package units reads the unit graph the umbrella chart resolved (the cluster-init-units
// ConfigMap it renders next to the Flux objects), so that the CLI shows exactly the graph Flux
// runs, and computes what the chart does not: dependents and the critical path.
package units

import (
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ConfigMapName is the ConfigMap the chart renders the graph into.
const ConfigMapName = "cluster-init-units"

// Unit is one unit as the chart resolved it.
type Unit struct {
	Name        string   `json:"name"`
	Enabled     bool     `json:"enabled"`
	Reason      string   `json:"reason"`
	Description string   `json:"description"`
	Contexts    []string `json:"contexts"`
	DependsOn   []string `json:"depends_on"`
	Dropped     []string `json:"dropped"`
	Kind        string   `json:"kind"`
	Path        string   `json:"path,omitempty"`
	Chart       string   `json:"chart,omitempty"`
	Kubeconfig  bool     `json:"kubeconfig"`
	Timeout     string   `json:"timeout"`
}

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
		return nil, fmt.Errorf("read unit graph from ConfigMap %s: %w", ConfigMapName, err)
	}
	for name, u := range raw.Units {
		u.Name = name
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

// Find locates the graph among rendered objects.
func Find(objs []*unstructured.Unstructured) (*Graph, error) {
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == ConfigMapName {
			return FromConfigMap(o)
		}
	}
	return nil, fmt.Errorf("unit graph: the chart rendered no ConfigMap %s", ConfigMapName)
}

// Enabled returns the enabled units in dependency order.
func (g *Graph) Enabled() []*Unit {
	out := make([]*Unit, 0, len(g.Order))
	for _, n := range g.Order {
		out = append(out, g.Units[n])
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
