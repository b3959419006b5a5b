package bootstrap

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// The revision of the applied Secrets moves when, and only when, their content does.
func TestSecretsRevisionFollowsTheContent(t *testing.T) {
	c := testenv.Start(t, "bootstrap")
	ctx := t.Context()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "cluster-init"}}}
	secret := func(password string) []*unstructured.Unstructured {
		return []*unstructured.Unstructured{{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"namespace": "cluster-init", "name": "cluster-init-secrets"},
			"stringData": map[string]any{"secrets.yaml": "credentials:\n  git:\n    password: " + password + "\n"}}}}
	}
	a := apply.New(c)
	if _, err := a.Apply(ctx, []*unstructured.Unstructured{ns}); err != nil {
		t.Fatal(err)
	}
	revision := func(password string) string {
		t.Helper()
		objs := secret(password)
		if _, err := a.Apply(ctx, objs); err != nil {
			t.Fatal(err)
		}
		r, err := secretsRevision(ctx, c, objs)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first, same, changed := revision("one"), revision("one"), revision("two")
	if first != same || first == changed {
		t.Errorf("revisions %q, %q (same content), %q (changed): want equal, then different", first, same, changed)
	}
}
