// Package values holds the layers of values a cluster-init release is rendered with (chart
// defaults, context values, environment values and secrets, overrides), remembers which file and
// line set every key, and checks the merged result against the chart's values.schema.json with
// messages that name the file, the key and what was expected.
package values

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	fluxchartutil "github.com/fluxcd/pkg/chartutil"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/boundedfile"
	"cluster-init.dev/cluster-init/internal/redact"
)

// Layer is one values file. Later layers take precedence over earlier ones.
type Layer struct {
	// File is the path shown to users, relative to the repository when possible.
	File string
	// Secret marks values that must never appear in a message.
	Secret bool
	// Defaults marks the chart's own values.yaml: a problem with a default is fixed by setting
	// the key in the environment, so messages never point there.
	Defaults bool
	// Data is the parsed content, decoded like Helm and Flux decode values.
	Data  map[string]any
	lines map[string]int
}

// yamlLine extracts the line of a yaml.v3 error ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ParseLayer reads a values file. Errors name the file and line, and never quote the content of a
// secret file.
func ParseLayer(file string, content []byte, secret bool) (Layer, error) {
	l := Layer{File: file, Secret: secret, Data: map[string]any{}, lines: map[string]int{}}
	if err := boundedfile.Values.CheckSize(file, content); err != nil {
		return l, err
	}
	if line, col, ok := invalidUTF8(content); ok {
		return l, fmt.Errorf("%s:%d: column %d: not UTF-8 text: expected a YAML file in UTF-8", file, line, col)
	}

	dec := yamlv3.NewDecoder(bytes.NewReader(content))
	var doc yamlv3.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return l, nil // empty file: no values
		}
		return l, yamlError(file, err, secret)
	}
	var next yamlv3.Node
	if err := dec.Decode(&next); err == nil && boundedfile.HasContent(&next) {
		return l, fmt.Errorf("%s:%d: a second YAML document: expected one document of values (a second one would be ignored)", file, next.Line)
	} else if !errors.Is(err, io.EOF) {
		return l, yamlError(file, err, secret)
	}
	if len(doc.Content) == 0 {
		return l, nil
	}
	root := doc.Content[0]
	if root.Kind != yamlv3.MappingNode {
		if root.Tag == "!!null" {
			return l, nil
		}
		return l, fmt.Errorf("%s:%d: expected a map of values at the top level, got %s", file, root.Line, nodeKind(root))
	}
	if err := boundedfile.CheckNode(root); err != nil {
		return l, fmt.Errorf("%s: %w", file, err)
	}
	if err := indexLines(root, nil, l.lines); err != nil {
		return l, fmt.Errorf("%s:%w", file, err)
	}
	if err := yaml.Unmarshal(content, &l.Data); err != nil {
		return l, yamlError(file, err, secret)
	}
	if l.Data == nil {
		l.Data = map[string]any{}
	}
	return l, nil
}

// invalidUTF8 finds the first byte that is not UTF-8, by line and column.
func invalidUTF8(content []byte) (line, col int, found bool) {
	if utf8.Valid(content) {
		return 0, 0, false
	}
	line, col = 1, 1
	for len(content) > 0 {
		r, size := utf8.DecodeRune(content)
		if r == utf8.RuneError && size <= 1 {
			return line, col, true
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		content = content[size:]
	}
	return line, col, true
}

// NodeLayer makes a layer of the values under a YAML mapping node of a larger document (the values
// of a HelmRelease), with the lines of that document.
func NodeLayer(file string, node *yamlv3.Node, secret bool) (Layer, error) {
	l := Layer{File: file, Secret: secret, Data: map[string]any{}, lines: map[string]int{}}
	if node.Kind != yamlv3.MappingNode {
		return l, fmt.Errorf("%s:%d: expected a map of values, got %s", file, node.Line, nodeKind(node))
	}
	if err := boundedfile.CheckNode(node); err != nil {
		return l, fmt.Errorf("%s:%d: %w", file, node.Line, err)
	}
	if err := indexLines(node, nil, l.lines); err != nil {
		return l, fmt.Errorf("%s:%w", file, err)
	}
	data, err := yamlv3.Marshal(node)
	if err != nil {
		return l, fmt.Errorf("%s:%d: %w", file, node.Line, err)
	}
	if err := yaml.Unmarshal(data, &l.Data); err != nil {
		return l, yamlError(file, err, secret)
	}
	return l, nil
}

// FromMap makes a layer of values that come from code (a flag, a computed source).
func FromMap(file string, data map[string]any) Layer {
	return Layer{File: file, Data: data, lines: map[string]int{}}
}

func yamlError(file string, err error, secret bool) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		reason := m[2]
		if secret {
			reason = redact.Quoted(reason)
		}
		return fmt.Errorf("%s:%s: invalid YAML: %s", file, m[1], reason)
	}
	if secret {
		msg = redact.Quoted(msg)
	}
	return fmt.Errorf("%s: invalid YAML: %s", file, strings.TrimPrefix(msg, "yaml: "))
}

func nodeKind(n *yamlv3.Node) string {
	switch n.Kind {
	case yamlv3.SequenceNode:
		return "a list"
	case yamlv3.MappingNode:
		return "a map"
	default:
		return "a " + strings.TrimPrefix(n.Tag, "!!")
	}
}

// indexLines records the line of every key (and list item) under node.
func indexLines(node *yamlv3.Node, path []string, lines map[string]int) error {
	switch node.Kind {
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := node.Content[i], node.Content[i+1]
			if k.Kind != yamlv3.ScalarNode {
				return fmt.Errorf("%d: %s: keys must be strings", k.Line, Key(path))
			}
			p := append(append([]string{}, path...), k.Value)
			if first, dup := lines[pathKey(p)]; dup {
				return fmt.Errorf("%d: %s: set twice (first on line %d)", k.Line, Key(p), first)
			}
			lines[pathKey(p)] = k.Line
			if err := indexLines(v, p, lines); err != nil {
				return err
			}
		}
	case yamlv3.SequenceNode:
		for i, item := range node.Content {
			p := append(append([]string{}, path...), strconv.Itoa(i))
			lines[pathKey(p)] = item.Line
			if err := indexLines(item, p, lines); err != nil {
				return err
			}
		}
	case yamlv3.AliasNode:
		if node.Alias != nil {
			return indexLines(node.Alias, path, lines)
		}
	}
	return nil
}

func pathKey(path []string) string { return strings.Join(path, "\x00") }

// Has tells whether the layer sets path, and on which line (0 for layers built from code).
func (l Layer) Has(path []string) (int, bool) {
	if line, ok := l.lines[pathKey(path)]; ok {
		return line, true
	}
	_, ok := lookup(l.Data, path)
	return 0, ok
}

func lookup(v any, path []string) (any, bool) {
	for _, p := range path {
		switch t := v.(type) {
		case map[string]any:
			next, ok := t[p]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// Merge merges the layers in order, later ones winning, with the merge helm-controller applies to
// a HelmRelease's valuesFrom and values.
func Merge(layers ...Layer) map[string]any {
	out := map[string]any{}
	for _, l := range layers {
		out = fluxchartutil.MergeMaps(out, l.Data)
	}
	return out
}

// Origin is where a key was set.
type Origin struct {
	File   string
	Line   int
	Secret bool
}

func (o Origin) String() string {
	if o.Line > 0 {
		return fmt.Sprintf("%s:%d", o.File, o.Line)
	}
	return o.File
}

// Locate finds the layer that set path, or the closest of its parents: the place to fix a value
// or to add a missing one. Chart defaults are skipped; fallback is used when no other layer sets
// any of them.
func Locate(layers []Layer, path []string, fallback Origin) Origin {
	for n := len(path); n > 0; n-- {
		for i := len(layers) - 1; i >= 0; i-- {
			if layers[i].Defaults {
				continue
			}
			if line, ok := layers[i].Has(path[:n]); ok {
				return Origin{File: layers[i].File, Line: line, Secret: layers[i].Secret}
			}
		}
	}
	return fallback
}

// Set returns where path itself is set, ignoring chart defaults.
func Set(layers []Layer, path []string) (Origin, bool) {
	for i := len(layers) - 1; i >= 0; i-- {
		if layers[i].Defaults {
			continue
		}
		if line, ok := layers[i].Has(path); ok {
			return Origin{File: layers[i].File, Line: line, Secret: layers[i].Secret}, true
		}
	}
	return Origin{}, false
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// Key formats a values path the way users write it: cluster.control_plane.replicas,
// registry_mirrors.hosts_config["quay.io"][0].mirror_url.
func Key(path []string) string {
	var b strings.Builder
	for i, p := range path {
		switch {
		case isIndex(p) && i > 0:
			b.WriteString("[" + p + "]")
		case plainKey.MatchString(p):
			if i > 0 {
				b.WriteString(".")
			}
			b.WriteString(p)
		default:
			b.WriteString("[" + strconv.Quote(p) + "]")
		}
	}
	if b.Len() == 0 {
		return "(top level)"
	}
	return b.String()
}

// PointerKey is the key of a JSON pointer into the values ("/cluster/workers/0" ->
// "cluster.workers[0]"), as Helm's schema errors name a value.
func PointerKey(pointer string) string {
	var path []string
	for _, part := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if part != "" {
			path = append(path, strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~"))
		}
	}
	return Key(path)
}

func isIndex(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// ParseKey is the inverse of Key for dotted keys, as the chart writes them in its errors.
func ParseKey(key string) []string {
	var path []string
	for _, part := range strings.Split(key, ".") {
		if part != "" {
			path = append(path, part)
		}
	}
	return path
}
