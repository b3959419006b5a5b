package units

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"cluster-init.dev/cluster-init/internal/termtext"
)

func depth(*Unit) float64 { return 1 }

// TreeLine is one enabled unit in the tree layout.
type TreeLine struct {
	// Prefix draws the branches before the name ("│   ├── ").
	Prefix string
	Unit   *Unit
	// Also lists the dependencies other than the one the unit is drawn under.
	Also []string
}

// Tree lays the enabled units out as a tree: each unit under the last of its dependencies to be
// ready, the others listed in Also.
func (g *Graph) Tree() []TreeLine {
	pos := map[string]int{}
	for i, n := range g.Order {
		pos[n] = i
	}
	parent := map[string]string{}
	children := map[string][]string{}
	var roots []string
	for _, n := range g.Order {
		deps := g.Units[n].DependsOn
		if len(deps) == 0 {
			roots = append(roots, n)
			continue
		}
		p := deps[0]
		for _, d := range deps {
			if pos[d] > pos[p] {
				p = d
			}
		}
		parent[n] = p
		children[p] = append(children[p], n)
	}
	var lines []TreeLine
	var walk func(n, prefix string, last, top bool)
	walk = func(n, prefix string, last, top bool) {
		branch, next := "├── ", "│   "
		if last {
			branch, next = "└── ", "    "
		}
		if top {
			branch, next = "", ""
		}
		u := g.Units[n]
		var also []string
		for _, d := range u.DependsOn {
			if d != parent[n] {
				also = append(also, d)
			}
		}
		lines = append(lines, TreeLine{Prefix: prefix + branch, Unit: u, Also: also})
		kids := children[n]
		for i, c := range kids {
			walk(c, prefix+next, i == len(kids)-1, false)
		}
	}
	for _, r := range roots {
		walk(r, "", true, true)
	}
	return lines
}

// WriteTree prints the enabled units as a tree (see Tree), then the disabled units and why, then
// the critical path.
func (g *Graph) WriteTree(w io.Writer, title string) error {
	fmt.Fprintf(w, "%s: %d units enabled, %d disabled\n\n", termtext.Line(title), len(g.Order), len(g.Units)-len(g.Order))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range g.Tree() {
		extra := ""
		if len(l.Also) > 0 {
			extra += " (also needs " + strings.Join(l.Also, ", ") + ")"
		}
		if l.Unit.Kubeconfig {
			extra += " [applied into the new cluster]"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\n", l.Prefix, termtext.Line(l.Unit.Name), termtext.Line(l.Unit.Timeout), termtext.Line(l.Unit.Description+extra))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	var disabled []string
	for _, n := range g.Names() {
		if !g.Units[n].Enabled {
			disabled = append(disabled, n)
		}
	}
	if len(disabled) > 0 {
		fmt.Fprintf(w, "\ndisabled:\n")
		for _, n := range disabled {
			fmt.Fprintf(tw, "  %s\t%s\n", termtext.Line(n), termtext.Line(g.Units[n].Reason))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if cp := g.CriticalPath(depth); len(cp) > 0 {
		fmt.Fprintf(w, "\ncritical path (longest dependency chain, %d units): %s\n", len(cp), termtext.Line(strings.Join(cp, " → ")))
	}
	return nil
}

// WriteMermaid prints the graph as a Mermaid flowchart: an arrow from each dependency to the unit
// that waits for it, the critical path in bold, disabled units dashed and unconnected.
func (g *Graph) WriteMermaid(w io.Writer) error {
	critical := map[string]bool{}
	cp := g.CriticalPath(depth)
	for i := 1; i < len(cp); i++ {
		critical[cp[i-1]+">"+cp[i]] = true
	}
	id := func(n string) string { return termtext.Line(strings.ReplaceAll(n, "-", "_")) }
	fmt.Fprintln(w, "flowchart TD")
	for _, n := range g.Names() {
		u := g.Units[n]
		fmt.Fprintf(w, "  %s[\"%s\"]\n", id(n), termtext.Line(n))
		if !u.Enabled {
			fmt.Fprintf(w, "  class %s disabled\n", id(n))
		}
	}
	for _, n := range g.Order {
		deps := append([]string{}, g.Units[n].DependsOn...)
		sort.Strings(deps)
		for _, d := range deps {
			arrow := "-->"
			if critical[d+">"+n] {
				arrow = "==>"
			}
			fmt.Fprintf(w, "  %s %s %s\n", id(d), arrow, id(n))
		}
	}
	fmt.Fprintln(w, "  classDef disabled stroke-dasharray: 5 5,color:#888")
	return nil
}

// WriteJSON prints the graph and its critical path.
func (g *Graph) WriteJSON(w io.Writer) error {
	out := struct {
		Context      string           `json:"context"`
		Units        map[string]*Unit `json:"units"`
		Order        []string         `json:"order"`
		CriticalPath []string         `json:"critical_path"`
	}{g.Context, g.Units, g.Order, g.CriticalPath(depth)}
	return termtext.WriteJSON(w, out, "  ")
}
