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
	"regexp"
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

// Compute compares each owner's objects with the cluster c. redact hides the secrets the caller
// knows in every value shown; the cluster's values may hold others (a credential the checkout
// rotated): the user information of a URL is never shown.
func Compute(ctx context.Context, c client.Client, owners []Owner, redact func(string) string) (Report, error) {
	r := Report{}
	d := differ{redact: redact}
	if d.redact == nil {
		d.redact = func(s string) string { return s }
	}
	for _, o := range owners {
		if err := d.add(ctx, c, &r, o); err != nil {
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

type differ struct {
	redact func(string) string
}

func (d differ) add(ctx context.Context, c client.Client, r *Report, o Owner) error {
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
		obj = stamped(obj, o, flux)
		diff, err := jsondiff.Unstructured(ctx, c, obj,
			jsondiff.FieldOwner(fieldManager[o.Kind]), jsondiff.MaskSecrets(true), jsondiff.Rationalize(true))
		switch {
		case err != nil && (apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err)):
			// Its kind or its namespace is not in the cluster yet: both come with the commit
			// (Flux applies CRDs and Namespaces first).
			r.Changes = append(r.Changes, Change{Owner: o.Label, Action: Added, Object: describe(obj)})
		case err != nil:
			r.Changes = append(r.Changes, Change{Owner: o.Label, Action: Refused, Object: describe(obj), Fields: d.refusal(obj, err)})
		case diff.Type == jsondiff.DiffTypeCreate:
			r.Changes = append(r.Changes, Change{Owner: o.Label, Action: Added, Object: describe(obj)})
		case diff.Type == jsondiff.DiffTypeUpdate:
			r.Changes = append(r.Changes, Change{Owner: o.Label, Action: Changed, Object: describe(obj), Fields: d.fields(obj, diff.Patch)})
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

// stamped is obj as its owner's controller applies it, with the metadata the controller adds:
// kustomize-controller labels what it applies with its Kustomization; Helm annotates a release's
// objects with the release and labels them managed by Helm, and helm-controller labels them with
// its HelmRelease. Compared without them, every object would show them removed.
func stamped(obj *unstructured.Unstructured, o Owner, flux *unstructured.Unstructured) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	if labels == nil {
		labels = map[string]string{}
	}
	switch o.Kind {
	case KindKustomization:
		labels["kustomize.toolkit.fluxcd.io/name"] = o.Name
		labels["kustomize.toolkit.fluxcd.io/namespace"] = o.Namespace
	case KindHelmRelease:
		name, namespace := helmRelease(o, flux)
		labels["app.kubernetes.io/managed-by"] = "Helm"
		labels["helm.toolkit.fluxcd.io/name"] = o.Name
		labels["helm.toolkit.fluxcd.io/namespace"] = o.Namespace
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations["meta.helm.sh/release-name"] = name
		annotations["meta.helm.sh/release-namespace"] = namespace
		obj.SetAnnotations(annotations)
	}
	obj.SetLabels(labels)
	return obj
}

// helmRelease is the Helm release a HelmRelease installs, as helm-controller names it: its
// releaseName, or <targetNamespace>-<name> with a target namespace, else its name; in its target
// namespace, else its own. Without the object (not applied yet), its name in its namespace.
func helmRelease(o Owner, flux *unstructured.Unstructured) (name, namespace string) {
	name, namespace = o.Name, o.Namespace
	if flux == nil {
		return name, namespace
	}
	target, _, _ := unstructured.NestedString(flux.Object, "spec", "targetNamespace")
	if target != "" {
		name, namespace = target+"-"+o.Name, target
	}
	if release, _, _ := unstructured.NestedString(flux.Object, "spec", "releaseName"); release != "" {
		name = release
	}
	return name, namespace
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
func (d differ) refusal(obj *unstructured.Unstructured, err error) []string {
	if isSecret(obj) {
		return []string{"the API server refuses it (its message is not shown: it may quote the Secret)"}
	}
	if u := errors.Unwrap(err); u != nil {
		err = u // the API server's own message, without ssa's "dry-run failed" frame
	}
	return []string{d.show(strings.TrimSpace(err.Error()), 0)}
}

func isSecret(obj *unstructured.Unstructured) bool {
	return obj.GroupVersionKind().Group == "" && obj.GetKind() == "Secret"
}

// fields says what a patch does, a line per operation. A Secret's lines name the keys only: its
// values, masked by the diff already, are not shown at all.
func (d differ) fields(obj *unstructured.Unstructured, patch wjsondiff.Patch) []string {
	secret := isSecret(obj)
	var out []string
	for _, op := range patch {
		path := dotted(op.Path)
		switch {
		case secret:
			out = append(out, fmt.Sprintf("%s: %s", path, op.Type))
		case op.Type == "add":
			out = append(out, fmt.Sprintf("%s: + %s", path, d.value(op.Value)))
		case op.Type == "remove":
			out = append(out, fmt.Sprintf("%s: - %s", path, d.value(op.OldValue)))
		default:
			out = append(out, fmt.Sprintf("%s: %s -> %s", path, d.value(op.OldValue), d.value(op.Value)))
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

// value prints a value on one line, its secrets hidden, cut at 200 characters.
func (d differ) value(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return d.show(fmt.Sprint(v), 200)
	}
	return d.show(string(data), 200)
}

// urlUserInfo is the user information of a URL: "scheme://user:password@" or "scheme://token@".
var urlUserInfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^\s/"'@]+(:[^\s"'@]*)?@`)

// show hides what the caller knows is secret and every URL's user information, then cuts s to
// max characters (0: not cut): cut after, so that no part of a secret escapes the redaction.
func (d differ) show(s string, max int) string {
	s = urlUserInfo.ReplaceAllString(d.redact(s), "${1}***@")
	if max > 0 && len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
