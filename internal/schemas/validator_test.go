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

// Each kind's name is checked as the API server checks it, and the namespace too; the resource
// of a kind (what RBAC rules name) comes from its CRD or, built in, the API server's rule.
func TestNamesAndResourcesOfEachKind(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.AddCRDs([]*unstructured.Unstructured{object(t, widgetCRD)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ text, want string }{
		{"apiVersion: v1\nkind: Service\nmetadata: {name: a.b, namespace: default}\nspec: {ports: [{port: 80}]}\n", "metadata.name"},
		{"apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n", "metadata.name"},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a.b, namespace: Not_A_Namespace}\n", "metadata.namespace"},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a.b, namespace: default}\n", ""},
	} {
		errs := v.Validate(t.Context(), object(t, c.text))
		got := ""
		for _, e := range errs {
			got += e.Error() + "\n"
		}
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.text, got, c.want)
		}
	}
	for _, c := range []struct{ obj, want string }{
		{widget, "widgets"},
		{"apiVersion: v1\nkind: ConfigMap\n", "configmaps"},
		{"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n", "networkpolicies"},
	} {
		if got, ok := v.Resource(object(t, c.obj).GroupVersionKind()); !ok || got != c.want {
			t.Errorf("%s: %q, %v", c.obj, got, ok)
		}
	}
	if _, ok := v.Resource(object(t, "apiVersion: nowhere.invalid/v1\nkind: Thing\n").GroupVersionKind()); ok {
		t.Error("an unknown kind has a resource")
	}
}
