package values

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Problem is one thing wrong in the values, with where to fix it.
type Problem struct {
	Origin  Origin
	Key     string
	Message string
}

func (p Problem) Error() string { return fmt.Sprintf("%s: %s: %s", p.Origin, p.Key, p.Message) }

// Problems is every problem found; it is an error when not empty.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns nil when there is no problem.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// Schema is a compiled values.schema.json.
type Schema struct {
	file     string
	raw      any
	compiled *jsonschema.Schema
}

const schemaURL = "file:///values.schema.json"

// CompileSchema compiles a chart's values.schema.json; file is only used in errors.
func CompileSchema(file string, data []byte) (*Schema, error) {
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, raw); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &Schema{file: file, raw: raw, compiled: compiled}, nil
}

// Validate checks the merge of layers against the schema. Each problem points at the layer that
// set the offending key (or, for a missing key, at the closest layer that sets its parent, else
// at fallback). Values of secret layers are never quoted.
func (s *Schema) Validate(layers []Layer, fallback Origin) Problems {
	merged := Merge(layers...)
	// The validator wants JSON types; a JSON round trip gives exactly what Helm validates.
	data, err := json.Marshal(merged)
	if err != nil {
		return Problems{{Origin: fallback, Key: "(top level)", Message: err.Error()}}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return Problems{{Origin: fallback, Key: "(top level)", Message: err.Error()}}
	}
	err = s.compiled.Validate(doc)
	var verr *jsonschema.ValidationError
	if err == nil {
		return nil
	}
	if !errors.As(err, &verr) {
		return Problems{{Origin: fallback, Key: "(top level)", Message: err.Error()}}
	}

	var out Problems
	seen := map[string]bool{}
	for _, leaf := range s.leaves(verr) {
		p := s.problem(layers, doc, leaf, fallback)
		if id := p.Error(); !seen[id] {
			seen[id] = true
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// leaves returns the innermost errors, the ones that say what is wrong, except that an
// alternative (oneOf, anyOf) whose schema describes what it expects is one error.
func (s *Schema) leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	switch e.ErrorKind.(type) {
	case *kind.OneOf, *kind.AnyOf:
		if s.description(s.node(e)) != "" {
			return []*jsonschema.ValidationError{e}
		}
	}
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, s.leaves(c)...)
	}
	return out
}

var printer = message.NewPrinter(language.English)

func (s *Schema) problem(layers []Layer, doc any, e *jsonschema.ValidationError, fallback Origin) Problem {
	path := e.InstanceLocation
	where := Locate(layers, path, fallback)
	value, _ := lookup(doc, path)
	show := func(v any) string {
		if where.Secret {
			return "the value (not shown: secret)"
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	schemaNode := s.node(e)
	desc := s.description(schemaNode)

	var msg string
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			path = append(append([]string{}, e.InstanceLocation...), m)
			childDesc := s.description(s.child(schemaNode, "properties", m))
			if childDesc == "" {
				// required by a conditional branch: the key's own schema describes it
				childDesc = s.description(s.at(path))
			}
			msg = "missing" + expected(childDesc)
		}
	case *kind.AdditionalProperties:
		allowed := s.propertyNames(schemaNode)
		for _, p := range k.Properties {
			path = append(append([]string{}, e.InstanceLocation...), p)
			where = Locate(layers, path, fallback)
		}
		msg = fmt.Sprintf("unknown key (known keys here: %s)", strings.Join(allowed, ", "))
		if len(k.Properties) > 1 {
			msg = fmt.Sprintf("unknown keys %s (known keys here: %s)", strings.Join(k.Properties, ", "), strings.Join(allowed, ", "))
		}
	case *kind.Type:
		msg = fmt.Sprintf("got %s, expected %s%s", k.Got, strings.Join(k.Want, " or "), parenthesized(desc))
	case *kind.Enum:
		var want []string
		for _, w := range k.Want {
			b, _ := json.Marshal(w)
			want = append(want, string(b))
		}
		msg = fmt.Sprintf("%s is not one of %s%s", show(value), strings.Join(want, ", "), parenthesized(desc))
	case *kind.Const:
		msg = fmt.Sprintf("%s is not allowed here%s", show(value), parenthesized(desc))
	case *kind.MinLength:
		if value == "" {
			msg = "must be set" + expected(desc)
			break
		}
		msg = fmt.Sprintf("%s is too short%s", show(value), parenthesized(desc))
	default:
		msg = fmt.Sprintf("%s is invalid: %s", show(value), e.ErrorKind.LocalizedString(printer))
		if where.Secret {
			// the validator's own message may quote the value
			msg = show(value) + " is invalid" + strings.Replace(expected(desc), ":", ",", 1)
		} else if desc != "" {
			msg = fmt.Sprintf("%s is invalid, expected %s", show(value), desc)
		}
	}
	if _, ok := e.ErrorKind.(*kind.Required); ok {
		where = Locate(layers, path, fallback)
	}
	return Problem{Origin: where, Key: Key(path), Message: msg}
}

func expected(desc string) string {
	if desc == "" {
		return ""
	}
	return ": expected " + desc
}

func parenthesized(desc string) string {
	if desc == "" {
		return ""
	}
	return " (" + desc + ")"
}

// node returns the schema object an error was raised in.
func (s *Schema) node(e *jsonschema.ValidationError) any {
	_, frag, _ := strings.Cut(e.SchemaURL, "#")
	return s.resolve(s.raw, splitPointer(frag))
}

func splitPointer(frag string) []string {
	frag = strings.TrimPrefix(frag, "/")
	if frag == "" {
		return nil
	}
	parts := strings.Split(frag, "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			p = u
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts
}

func (s *Schema) resolve(v any, tokens []string) any {
	for _, t := range tokens {
		switch m := v.(type) {
		case map[string]any:
			v = m[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i >= len(m) {
				return nil
			}
			v = m[i]
		default:
			return nil
		}
	}
	return v
}

// deref follows a local $ref.
func (s *Schema) deref(v any) any {
	for range 8 {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok || !strings.HasPrefix(ref, "#") {
			return v
		}
		v = s.resolve(s.raw, splitPointer(strings.TrimPrefix(ref, "#")))
	}
	return v
}

func (s *Schema) child(node any, keyword, name string) any {
	m, ok := s.deref(node).(map[string]any)
	if !ok {
		return nil
	}
	props, ok := m[keyword].(map[string]any)
	if !ok {
		return nil
	}
	return props[name]
}

// at returns the schema of an instance path, following properties and additionalProperties from
// the root.
func (s *Schema) at(path []string) any {
	node := s.raw
	for _, p := range path {
		m, ok := s.deref(node).(map[string]any)
		if !ok {
			return nil
		}
		if child := s.child(m, "properties", p); child != nil {
			node = child
			continue
		}
		node = m["additionalProperties"]
	}
	return node
}

func (s *Schema) description(node any) string {
	m, ok := s.deref(node).(map[string]any)
	if !ok {
		return ""
	}
	d, _ := m["description"].(string)
	return d
}

func (s *Schema) propertyNames(node any) []string {
	m, ok := s.deref(node).(map[string]any)
	if !ok {
		return nil
	}
	props, _ := m["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
