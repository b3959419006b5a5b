package schemas

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func object(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	o := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(text), &o.Object); err != nil {
		t.Fatal(err)
	}
	return o
}

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.invalid
spec:
  group: example.invalid
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
`

const widget = `
apiVersion: example.invalid/v1
kind: Widget
metadata: {name: w, namespace: default}
spec: {size: 3}
`

// A clone knows what its origin knew; a CRD one clone learns is not the other's: environments
// validated side by side do not lend each other their CRDs.
func TestACloneLearnsOnItsOwn(t *testing.T) {
	base, err := New()
	if err != nil {
		t.Fatal(err)
	}
	a, b := base.Clone(), base.Clone()
	if err := a.AddCRDs([]*unstructured.Unstructured{object(t, widgetCRD)}); err != nil {
		t.Fatal(err)
	}
	if errs := a.Validate(t.Context(), object(t, widget)); len(errs) != 0 {
		t.Errorf("the clone that learnt the CRD: %v", errs)
	}
	for name, v := range map[string]*Validator{"the other clone": b, "the origin": base} {
		if errs := v.Validate(t.Context(), object(t, widget)); len(errs) != 1 || !strings.Contains(errs[0].Error(), "no schema for example.invalid/v1, Kind=Widget") {
			t.Errorf("%s validated a Widget: %v", name, errs)
		}
	}
}

// A built-in object is judged the same the second time, from the memo the clones share.
func TestABuiltinObjectIsJudgedTheSameAgain(t *testing.T) {
	base, err := New()
	if err != nil {
		t.Fatal(err)
	}
	bad := object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: \"1\"}\nsurplus: true\n")
	good := object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: \"1\"}\n")
	for _, v := range []*Validator{base, base.Clone(), base} {
		if errs := v.Validate(t.Context(), bad); len(errs) != 1 || !strings.Contains(errs[0].Error(), "surplus") {
			t.Errorf("a ConfigMap with an unknown field: %v", errs)
		}
		if errs := v.Validate(t.Context(), good); len(errs) != 0 {
			t.Errorf("a valid ConfigMap: %v", errs)
		}
	}
}
