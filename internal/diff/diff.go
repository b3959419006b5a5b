// Package diff tells what a checkout would change in a running cluster, object by object, as
// `flux diff kustomization` does: each object a Flux Kustomization or HelmRelease would apply is
// applied in dry-run mode (server-side, as that controller's field manager) and compared with the
// object in the cluster; what the Flux object's inventory holds and the checkout no longer has is
// what its controller would prune. Nothing is changed. A Secret's values are never shown.
package diff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	wjsondiff "github.com/wI2L/jsondiff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Flux objects that apply others, and the field manager each applies with.
const (
	KindKustomization = "Kustomization"
	KindHelmRelease   = "HelmRelease"
)

var (
	fluxGroupVersion = map[string]schema.GroupVersion{
		KindKustomization: {Group: "kustomize.toolkit.fluxcd.io", Version: "v1"},
		KindHelmRelease:   {Group: "helm.toolkit.fluxcd.io", Version: "v2"},
	}
	fieldManager = map[string]string{
		KindKustomization: "kustomize-controller",
		KindHelmRelease:   "helm-controller",
	}
)

// Owner is a Flux object of the cluster and the objects the checkout has it apply.
type Owner struct {
	// Kind is KindKustomization or KindHelmRelease.
	Kind            string
	Namespace, Name string
	// Label is what the report calls it ("unit capi", "release cluster-init").
	Label   string
	Desired []*unstructured.Unstructured
}

// Action is what a commit of the checkout would do to an object.
type Action string

const (
	Added   Action = "added"
	Changed Action = "changed"
	Removed Action = "removed"
	// Refused: the API server refuses the object (the dry run failed); Fields say why.
	Refused Action = "refused"
)

// Change is one object the checkout would add, change or remove.
type Change struct {
	Owner  string `json:"owner"`
	Action Action `json:"action"`
	// Object is "Kind namespace/name" (or "Kind name" without a namespace).
	Object string `json:"object"`
	// Fields are the fields a change sets, replaces or removes, one per line ("spec.replicas: 1 -> 2").
	Fields []string `json:"fields,omitempty"`
}

// Report is the difference between a checkout and a cluster.
type Report struct {
	Changes []Change `json:"changes"`
	// Unchanged counts the objects the checkout has as the cluster has them.
	Unchanged int `json:"unchanged"`
	// NotApplied are the owners the cluster does not have yet: everything they hold is added.
	NotApplied []string `json:"notApplied,omitempty"`
}

// Compute compares each owner's objects with the cluster c.
func Compute(ctx context.Context, c client.Client, owners []Owner) (Report, error) {
	var r Report
	for _, o := range owners {
		if err := r.add(ctx, c, o); err != nil {
			return r, fmt.Errorf("%s: %w", o.Label, err)
		}
	}
	sort.SliceStable(r.Changes, func(i, j int) bool {
		if r.Changes[i].Owner != r.Changes[j].Owner {
			return r.Changes[i].Owner < r.Changes[j].Owner
		}
		return r.Changes[i].Object < r.Changes[j].Object
	})
	return r, nil
}

func (r *Report) add(ctx context.Context, c client.Client, o Owner) error {
	gv, ok := fluxGroupVersion[o.Kind]
	if !ok {
		return fmt.Errorf("%s: expected a %s or a %s", o.Kind, KindKustomization, KindHelmRelease)
	}
	flux := &unstructured.Unstructured{}
	flux.SetGroupVersionKind(gv.WithKind(o.Kind))
	err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, flux)
	switch {
	case apierrors.IsNotFound(err):
		r.NotApplied = append(r.NotApplied, o.Label)
		flux = nil
	case err != nil:
		return fmt.Errorf("read %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
	}

	desired := map[object.ObjMetadata]bool{}
	for _, obj := range o.Desired {
		desired[metadataOf(obj)] = true
	}
	for _, obj := range o.Desired {
		d, err := jsondiff.Unstructured(ctx, c, obj,
			jsondiff.FieldOwner(fieldManager[o.Kind]), jsondiff.MaskSecrets(true), jsondiff.Rationalize(true))
		switch {
		case err != nil && (apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err)):
			// Its kind or its namespace is not in the cluster yet: both come with the commit
			// (Flux applies CRDs and Namespaces first).
			r.Changes = append(r.Changes, Change{Owner: o.Label, Action: Added, Object: describe(obj)})
		case err != nil:
			r.Changes = append(r.Changes, Change{Owner: o.Label, Action: Refused, Object: describe(obj), Fields: refusal(obj, err)})
		case d.Type == jsondiff.DiffTypeCreate:
			r.Changes = append(r.Changes, Change{Owner: o.Label, Action: Added, Object: describe(obj)})
		case d.Type == jsondiff.DiffTypeUpdate:
			r.Changes = append(r.Changes, Change{Owner: o.Label, Action: Changed, Object: describe(obj), Fields: fields(obj, d.Patch)})
		default:
			r.Unchanged++
		}
	}

	if flux == nil {
		return nil
	}
	entries, _, err := unstructured.NestedSlice(flux.Object, "status", "inventory", "entries")
	if err != nil {
		return fmt.Errorf("read the inventory of %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
	}
	for _, e := range entries {
		entry, _ := e.(map[string]any)
		id, _ := entry["id"].(string)
		m, err := object.ParseObjMetadata(id)
		if err != nil {
			return fmt.Errorf("inventory of %s %s/%s: entry %q: %w", o.Kind, o.Namespace, o.Name, id, err)
		}
		if !desired[m] {
			r.Changes = append(r.Changes, Change{Owner: o.Label, Action: Removed, Object: describeMeta(m)})
		}
	}
	return nil
}

func metadataOf(obj *unstructured.Unstructured) object.ObjMetadata {
	return object.ObjMetadata{Namespace: obj.GetNamespace(), Name: obj.GetName(), GroupKind: obj.GroupVersionKind().GroupKind()}
}

func describe(obj *unstructured.Unstructured) string { return describeMeta(metadataOf(obj)) }

func describeMeta(m object.ObjMetadata) string {
	if m.Namespace == "" {
		return m.GroupKind.Kind + " " + m.Name
	}
	return m.GroupKind.Kind + " " + m.Namespace + "/" + m.Name
}

// refusal is why the API server refused the dry run of obj; for a Secret only that it did, as
// a validation message may quote a value.
func refusal(obj *unstructured.Unstructured, err error) []string {
	if isSecret(obj) {
		return []string{"the API server refuses it (its message is not shown: it may quote the Secret)"}
	}
	if u := errors.Unwrap(err); u != nil {
		err = u // the API server's own message, without ssa's "dry-run failed" frame
	}
	return []string{strings.TrimSpace(err.Error())}
}

func isSecret(obj *unstructured.Unstructured) bool {
	return obj.GroupVersionKind().Group == "" && obj.GetKind() == "Secret"
}

// fields says what a patch does, a line per operation. A Secret's lines name the keys only: its
// values, masked by the diff already, are not shown at all.
func fields(obj *unstructured.Unstructured, patch wjsondiff.Patch) []string {
	secret := isSecret(obj)
	var out []string
	for _, op := range patch {
		path := dotted(op.Path)
		switch {
		case secret:
			out = append(out, fmt.Sprintf("%s: %s", path, op.Type))
		case op.Type == "add":
			out = append(out, fmt.Sprintf("%s: + %s", path, short(op.Value)))
		case op.Type == "remove":
			out = append(out, fmt.Sprintf("%s: - %s", path, short(op.OldValue)))
		default:
			out = append(out, fmt.Sprintf("%s: %s -> %s", path, short(op.OldValue), short(op.Value)))
		}
	}
	return out
}

// dotted turns a JSON pointer into the path a user reads ("/spec/template/0" -> "spec.template[0]").
func dotted(pointer string) string {
	if pointer == "" || pointer == "/" {
		return "(the whole object)"
	}
	var b strings.Builder
	for _, part := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		if isIndex(part) {
			b.WriteString("[" + part + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteString(".")
		}
		b.WriteString(part)
	}
	return b.String()
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// short prints a value on one line, cut at 200 characters.
func short(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(data)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
