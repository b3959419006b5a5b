// Package schemas validates objects offline against the schemas a Kubernetes API server would
// apply: built-in types by strict decoding into their Go types (unknown and duplicate fields,
// wrong types), custom resources with the apiextensions-apiserver code (structural pruning to
// find unknown fields, defaulting, OpenAPI validation and x-kubernetes-validations CEL rules)
// using the CRDs of the vendored components.
package schemas

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/meta"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// crdVersion is what validating one served version of a CRD needs. Its validators are built on
// first use: a render holds the CRDs of every component but instances of few of them, and the CEL
// rules of a CRD take long to compile.
type crdVersion struct {
	crd        string
	resource   string
	namespaced bool
	schema     *apiextensions.JSONSchemaProps

	once       sync.Once
	err        error
	structural *structuralschema.Structural
	validator  validation.SchemaValidator
	cel        *cel.Validator
}

func (c *crdVersion) compile() error {
	c.once.Do(func() {
		if c.validator, _, c.err = validation.NewSchemaValidator(c.schema); c.err != nil {
			c.err = fmt.Errorf("CustomResourceDefinition %s: %w", c.crd, c.err)
			return
		}
		c.cel = cel.NewValidator(c.structural, true, celconfig.PerCallLimit)
	})
	return c.err
}

// Validator validates objects against built-in types and the CRDs it was given.
type Validator struct {
	scheme  *runtime.Scheme
	decoder runtime.Decoder
	crds    map[schema.GroupVersionKind]*crdVersion
	// seen are the CRDs learnt, by name, with a digest of their spec: the same CRD given again
	// (every context renders the same components) is not converted again.
	seen map[string]string
	// decoded holds the outcome of each built-in object decoded, by the digest of its JSON: every
	// context and environment renders the same CRDs and controllers, and a CRD takes long to
	// decode strictly. Shared by clones.
	decoded *sync.Map
}

// New returns a validator that knows the built-in types of client-go, CRDs and APIServices.
func New() (*Validator, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, apiregistrationv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return &Validator{
		scheme:  s,
		decoder: serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer(),
		crds:    map[schema.GroupVersionKind]*crdVersion{},
		seen:    map[string]string{},
		decoded: &sync.Map{},
	}, nil
}

// Clone returns a validator that knows what v knows; what either learns afterwards stays its own.
// A CRD's compiled validators are shared: they are safe for concurrent use, and compiled once.
func (v *Validator) Clone() *Validator {
	return &Validator{scheme: v.scheme, decoder: v.decoder, crds: maps.Clone(v.crds), seen: maps.Clone(v.seen), decoded: v.decoded}
}

// AddCRDs learns the CustomResourceDefinitions among objs; other objects are ignored.
func (v *Validator) AddCRDs(objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" || !strings.HasPrefix(o.GetAPIVersion(), "apiextensions.k8s.io/") {
			continue
		}
		spec, err := json.Marshal(o.Object["spec"])
		if err != nil {
			return fmt.Errorf("CustomResourceDefinition %s: %w", o.GetName(), err)
		}
		digest := fmt.Sprintf("%x", sha256.Sum256(spec))
		if v.seen[o.GetName()] == digest {
			continue
		}
		v.seen[o.GetName()] = digest
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
			return fmt.Errorf("CustomResourceDefinition %s: %w", o.GetName(), err)
		}
		for _, ver := range crd.Spec.Versions {
			if !ver.Served || ver.Schema == nil {
				continue
			}
			internal := &apiextensions.CustomResourceValidation{}
			if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(ver.Schema, internal, nil); err != nil {
				return fmt.Errorf("CustomResourceDefinition %s version %s: %w", crd.Name, ver.Name, err)
			}
			// An API server refuses a CRD whose schema is not structural: a problem of the render.
			structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
			if err != nil {
				return fmt.Errorf("CustomResourceDefinition %s version %s: schema is not structural: %w", crd.Name, ver.Name, err)
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind}
			v.crds[gvk] = &crdVersion{
				crd:        crd.Name + " version " + ver.Name,
				resource:   crd.Spec.Names.Plural,
				namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
				schema:     internal.OpenAPIV3Schema,
				structural: structural,
			}
		}
	}
	return nil
}

// Resource is the resource of a kind the validator knows (what RBAC rules name), and whether it
// knows the kind.
func (v *Validator) Resource(gvk schema.GroupVersionKind) (string, bool) {
	if c, ok := v.crds[gvk]; ok {
		return c.resource, true
	}
	if v.scheme.Recognizes(gvk) {
		// The built-in types follow the rule the API server's own RESTMapper guesses with.
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		return plural.Resource, true
	}
	return "", false
}

// Validate returns every problem of obj, each naming the field.
func (v *Validator) Validate(ctx context.Context, obj *unstructured.Unstructured) []error {
	gvk := obj.GroupVersionKind()
	errs := v.validateMeta(obj)
	if c, ok := v.crds[gvk]; ok {
		return append(errs, v.validateCustom(ctx, obj, c)...)
	}
	if v.scheme.Recognizes(gvk) {
		return append(errs, v.validateBuiltin(obj)...)
	}
	return append(errs, fmt.Errorf("no schema for %s: neither a built-in type nor defined by a vendored CRD", gvk))
}

func (v *Validator) validateMeta(obj *unstructured.Unstructured) []error {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if obj.GetName() == "" {
		errs = append(errs, field.Required(meta.Child("name"), ""))
	} else {
		// Each kind's names as the API server checks them: RBAC objects only need a valid path
		// segment ("cert-manager:leaderelection"), a Namespace is a DNS label, a Service an RFC
		// 1035 label (it names DNS records), the other kinds a DNS subdomain.
		check := metavalidation.NameIsDNSSubdomain
		switch gvk := obj.GroupVersionKind(); {
		case gvk.Group == "rbac.authorization.k8s.io":
			check = func(name string, prefix bool) []string { return path.IsValidPathSegmentName(name) }
		case gvk.Group == "" && gvk.Kind == "Namespace":
			check = metavalidation.ValidateNamespaceName
		case gvk.Group == "" && gvk.Kind == "Service":
			check = metavalidation.NameIsDNS1035Label
		}
		for _, msg := range check(obj.GetName(), false) {
			errs = append(errs, field.Invalid(meta.Child("name"), obj.GetName(), msg))
		}
	}
	if ns := obj.GetNamespace(); ns != "" {
		for _, msg := range metavalidation.ValidateNamespaceName(ns, false) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), ns, msg))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(obj.GetLabels(), meta.Child("labels"))...)
	errs = append(errs, metavalidation.ValidateAnnotations(obj.GetAnnotations(), meta.Child("annotations"))...)
	return toErrors(errs)
}

func (v *Validator) validateBuiltin(obj *unstructured.Unstructured) []error {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return []error{err}
	}
	digest := sha256.Sum256(data)
	if err, ok := v.decoded.Load(digest); ok {
		if err != nil {
			return []error{err.(error)}
		}
		return nil
	}
	_, _, err = v.decoder.Decode(data, nil, nil)
	v.decoded.Store(digest, err)
	if err != nil {
		return []error{err}
	}
	return nil
}

func (v *Validator) validateCustom(ctx context.Context, obj *unstructured.Unstructured, c *crdVersion) []error {
	if err := c.compile(); err != nil {
		return []error{err}
	}
	var errs []error
	if !c.namespaced && obj.GetNamespace() != "" {
		errs = append(errs, fmt.Errorf("metadata.namespace: %s is cluster-scoped (CRD %s), no namespace allowed", obj.GetKind(), c.crd))
	}
	content, err := jsonCopy(obj.Object)
	if err != nil {
		return []error{err}
	}
	// What the API server would drop: fields the schema does not know.
	unknown := structuralpruning.PruneWithOptions(runtime.DeepCopyJSON(content), c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	sort.Strings(unknown)
	for _, f := range unknown {
		errs = append(errs, fmt.Errorf("%s: unknown field (CRD %s)", f, c.crd))
	}
	// Validate as the API server does: after defaulting.
	structuraldefaulting.Default(content, c.structural)
	errs = append(errs, toErrors(validation.ValidateCustomResource(nil, content, c.validator))...)
	celErrs, _ := c.cel.Validate(ctx, nil, c.structural, content, nil, celconfig.RuntimeCELCostBudget)
	errs = append(errs, toErrors(celErrs)...)
	return errs
}

// jsonCopy deep-copies an object into the JSON types the API server validates (int64, float64,
// ...), whatever Go types the producer used.
func jsonCopy(obj map[string]any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := utiljson.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func toErrors(list field.ErrorList) []error {
	out := make([]error, 0, len(list))
	for _, e := range list {
		out = append(out, e)
	}
	return out
}
