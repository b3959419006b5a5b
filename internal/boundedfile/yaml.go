package boundedfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	yamlv3 "go.yaml.in/yaml/v3"
)

// MaxAliasNodes bounds what a YAML document's aliases (*name) add once expanded: a few lines of
// anchors and aliases can stand for billions of values, which every parser that decodes them into
// values (kustomize, Helm, the API server's) builds in memory.
const MaxAliasNodes = 100_000

// MaxDepth bounds how deep a YAML document nests (maps and lists in one another). The deepest
// objects this project reads (CRDs' schemas) nest a few dozen levels.
const MaxDepth = 128

// CheckManifest checks the bytes of a manifest file (of a tenant's directory, of the
// applications' directory, or an entry of an artifact of them) before anything parses it into
// values: its size, its number of documents, what its aliases expand to and its depth. name
// names it in errors. A YAML syntax error is left to the parser that reads the file, which names
// its line.
func CheckManifest(name string, data []byte) error { return Manifest.Check(name, data) }

// Budget is what the YAML aliases of several documents may add together once expanded: a
// directory is parsed whole (kustomize-controller builds every file of a tenant's directory in
// one process), so a bound per document or per file would let many small bombs add up.
type Budget struct {
	left int
	// scope says what shares the budget, in messages ("the file", "the directory").
	scope string
}

// NewBudget is a budget of MaxAliasNodes values for what scope names.
func NewBudget(scope string) *Budget { return &Budget{left: MaxAliasNodes, scope: scope} }

// Check checks bytes already read as a file of kind k: its size and, for YAML, its documents,
// aliases (all its documents together) and depth.
func (k Kind) Check(name string, data []byte) error {
	return k.CheckIn(name, data, NewBudget("the file"))
}

// CheckIn is Check with the aliases of the file counted against b, shared with other files.
func (k Kind) CheckIn(name string, data []byte, b *Budget) error {
	if err := k.CheckSize(name, data); err != nil {
		return err
	}
	if !k.YAML {
		return nil
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	docs := 0
	for {
		var doc yamlv3.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // a syntax error: the file's parser reports it, with its line
		}
		if !HasContent(&doc) {
			continue
		}
		if docs++; docs > k.MaxDocuments {
			if k.MaxDocuments == 1 {
				return fmt.Errorf("%s:%d: a second YAML document: expected one document (a second one would be ignored)", name, doc.Line)
			}
			return fmt.Errorf("%s:%d: more than %d YAML documents: expected %s of at most %d", name, doc.Line, k.MaxDocuments, k.Name, k.MaxDocuments)
		}
		if err := b.check(&doc); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
}

// HasContent tells whether a document holds anything: a trailing "---" or comments do not.
func HasContent(doc *yamlv3.Node) bool {
	return len(doc.Content) > 0 && doc.Content[0].Tag != "!!null"
}

// CheckNode checks one parsed YAML node (a document, or a part of one): what its aliases add once
// expanded (at most MaxAliasNodes values) and how deep it nests, aliases followed (at most
// MaxDepth). It costs a walk of the nodes as written, whatever they expand to.
func CheckNode(n *yamlv3.Node) error { return NewBudget("the document").check(n) }

// check checks n within what is left of b, and takes what its aliases add from it.
func (b *Budget) check(n *yamlv3.Node) error {
	w := written(n)
	limit := w + b.left
	m := measurer{limit: limit, memo: map[*yamlv3.Node]cost{}}
	c := m.measure(n)
	if c.nodes > limit {
		b.left = 0
		return fmt.Errorf("its YAML aliases (*name) expand to more than %d values in %s: expected plain values", MaxAliasNodes, b.scope)
	}
	if c.depth > MaxDepth {
		return fmt.Errorf("nests deeper than %d levels of maps and lists: expected at most %d", MaxDepth, MaxDepth)
	}
	b.left -= c.nodes - w
	return nil
}

// written counts the nodes as written (an alias is one).
func written(n *yamlv3.Node) int {
	count := 1
	for _, c := range n.Content {
		count += written(c)
	}
	return count
}

type cost struct{ nodes, depth int }

// measurer counts what nodes expand to, remembering each node's count so that the walk stays
// linear in the file however often an anchor is used.
type measurer struct {
	limit int
	memo  map[*yamlv3.Node]cost
}

func (m *measurer) measure(n *yamlv3.Node) cost {
	if c, ok := m.memo[n]; ok {
		return c
	}
	// An alias of one of its own ancestors expands forever.
	m.memo[n] = cost{nodes: m.limit + 1, depth: MaxDepth + 1}
	if n.Kind == yamlv3.AliasNode && n.Alias != nil {
		c := m.measure(n.Alias)
		m.memo[n] = c
		return c
	}
	c := cost{nodes: 1, depth: 1}
	for _, child := range n.Content {
		cc := m.measure(child)
		c.nodes += cc.nodes
		c.depth = max(c.depth, cc.depth+1)
		if c.nodes > m.limit || c.depth > MaxDepth {
			c.nodes = min(c.nodes, m.limit+1)
			break
		}
	}
	m.memo[n] = c
	return c
}
