package render_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/checkout"
	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/values"
	"cluster-init.dev/cluster-init/internal/versions"
)

func kubeVersion(t testing.TB, root string) string {
	t.Helper()
	pins, err := versions.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	return pins["KUBERNETES_VERSION"]
}

// copyEnv copies environment-values/<name> to a temporary directory, applies edits (file name ->
// new content from old content) and returns the directory.
func copyEnv(t testing.TB, root, name string, edits map[string]func(string) string) string {
	t.Helper()
	src := filepath.Join(root, environment.Dir, name)
	dst := filepath.Join(t.TempDir(), filepath.Base(name))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for file, edit := range edits {
		path := filepath.Join(dst, file)
		old, _ := os.ReadFile(path)
		if edit == nil {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(path, []byte(edit(string(old))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// loadEnv loads an edited copy of an environment (dir), with file names shown as the CLI shows
// them; testenv.Environment loads the checkout's own.
func loadEnv(t testing.TB, root, name, dir string) (*environment.Environment, error) {
	t.Helper()
	return environment.Load(name, dir, func(p string) string { return checkout.Relative(root, p) }, nil)
}

func renderEnv(t testing.TB, root string, env *environment.Environment, context string, overrides ...values.Layer) *render.Result {
	t.Helper()
	res, err := render.Render(contextOf(t), root, kubeVersion(t, root), render.Options{Env: env, Context: context, Overrides: overrides})
	if err != nil {
		t.Fatalf("render %s in context %s: %v", env.Name, context, err)
	}
	return res
}

func contextOf(t testing.TB) context.Context {
	if tt, ok := t.(*testing.T); ok {
		return tt.Context()
	}
	return context.Background()
}

// kustomizationEdges reads the dependsOn of every rendered unit Kustomization as "unit -> dependency".
func kustomizationEdges(res *render.Result) (units []string, edges []string) {
	for _, o := range res.Objects {
		if o.Unit != "" || o.Object.GetKind() != "Kustomization" {
			continue
		}
		units = append(units, o.Object.GetName())
		deps, _, _ := unstructured.NestedSlice(o.Object.Object, "spec", "dependsOn")
		for _, d := range deps {
			name, _ := d.(map[string]any)["name"].(string)
			edges = append(edges, o.Object.GetName()+" -> "+name)
		}
	}
	sort.Strings(units)
	sort.Strings(edges)
	return units, edges
}

func selfManaged() values.Layer {
	return managementstate.State{SelfManaged: true}.Layer()
}

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	return unstructured.NestedString(obj, fields...)
}
