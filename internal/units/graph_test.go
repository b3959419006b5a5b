package units

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func testGraph() *Graph {
	u := func(name string, deps ...string) *Unit {
		return &Unit{Name: name, Enabled: true, DependsOn: deps, Timeout: "5m"}
	}
	g := &Graph{Context: "bootstrap", Units: map[string]*Unit{
		"a": u("a"), "b": u("b", "a"), "c": u("c", "a"), "d": u("d", "b", "c"), "e": u("e"),
		"off": {Name: "off", Reason: "enabled: false"},
	}}
	g.Order = []string{"a", "e", "b", "c", "d"}
	return g
}

func TestCriticalPathIsTheLongestWeightedChain(t *testing.T) {
	g := testGraph()
	if got := g.CriticalPath(func(*Unit) float64 { return 1 }); !slices.Equal(got, []string{"a", "b", "d"}) {
		t.Errorf("by depth: %v", got)
	}
	// A slow c moves the critical path through it.
	slowC := func(u *Unit) float64 {
		if u.Name == "c" {
			return 10
		}
		return 1
	}
	if got := g.CriticalPath(slowC); !slices.Equal(got, []string{"a", "c", "d"}) {
		t.Errorf("with c slow: %v", got)
	}
	// A slow independent unit is the critical path on its own.
	slowE := func(u *Unit) float64 {
		if u.Name == "e" {
			return 100
		}
		return 1
	}
	if got := g.CriticalPath(slowE); !slices.Equal(got, []string{"e"}) {
		t.Errorf("with e slow: %v", got)
	}
}

func TestPrintersShowEveryUnitAndEdge(t *testing.T) {
	g := testGraph()
	var tree, mermaid bytes.Buffer
	if err := g.WriteTree(&tree, "test"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "└── c", "(also needs b)", "off  enabled: false", "critical path (longest dependency chain, 3 units): a → b → d"} {
		if !strings.Contains(tree.String(), want) {
			t.Errorf("tree lacks %q:\n%s", want, tree.String())
		}
	}
	if err := g.WriteMermaid(&mermaid); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a ==> b", "a --> c", "b ==> d", "c --> d", "class off disabled"} {
		if !strings.Contains(mermaid.String(), want) {
			t.Errorf("mermaid lacks %q:\n%s", want, mermaid.String())
		}
	}
	if !slices.Equal(g.Dependents("a"), []string{"b", "c"}) {
		t.Errorf("dependents of a: %v", g.Dependents("a"))
	}
}

// Units are deleted dependents first: nothing is deleted while a unit still depends on it.
func TestUnitsAreDeletedDependentsFirst(t *testing.T) {
	deps := map[string][]string{
		"cluster-init":      {},
		"environment":       {},
		"cert-manager":      {},
		"capi":              {"cert-manager"},
		"cabpk":             {"capi"},
		"capd":              {"capi"},
		"workload-clusters": {"capi", "cabpk", "capd"},
	}
	got := fmt.Sprint(DependentsFirst(deps))
	want := "[[cluster-init environment workload-clusters] [cabpk capd] [capi] [cert-manager]]"
	if got != want {
		t.Errorf("batches %s, want %s", got, want)
	}
	// A cycle still ends.
	if got := fmt.Sprint(DependentsFirst(map[string][]string{"a": {"b"}, "b": {"a"}, "c": {"a"}})); got != "[[c] [a b]]" {
		t.Errorf("with a cycle: %s", got)
	}
}
