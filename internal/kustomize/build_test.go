package kustomize_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/kustomize"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/source"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// controllerBuild is kustomize-controller's own path, step by step: the generator writes the
// overlay into the source tree, SecureBuild (with its per-build OpenAPI reset) builds it, the
// inline variables are substituted, and every resource goes through RNode.MarshalJSON.
func controllerBuild(t *testing.T, root string, ks *unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	path, _, _ := unstructured.NestedString(ks.Object, "spec", "path")
	dir := root + "/" + path
	action, err := fluxkustomize.NewGenerator(root, *ks).WriteFile(dir, fluxkustomize.WithSaveOriginalKustomization())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fluxkustomize.CleanDirectory(dir, action) }()
	resMap, err := fluxkustomize.SecureBuild(root, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, res := range resMap.Resources() {
		if _, err := fluxkustomize.SubstituteVariables(t.Context(), nil, *ks, res, fluxkustomize.SubstituteWithDryRun(true)); err != nil {
			t.Fatal(err)
		}
		data, err := res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		out = append(out, obj)
	}
	return out
}

// The builder gives exactly what kustomize-controller gives, for every unit of every environment
// in every context, built in parallel.
func TestBuildIsTheControllersBuild(t *testing.T) {
	root := testenv.Checkout(t)
	reference := t.TempDir()
	if err := source.Snapshot(root, reference); err != nil {
		t.Fatal(err)
	}
	r, err := render.New(root, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := kustomize.NewBuilder(r.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ env, context string }{
		{"kubeadm-capd", render.ContextBootstrap}, {"kubeadm-capd", render.ContextManagement},
		{"rke2-capo", render.ContextBootstrap}, {"kubeadm-capo", render.ContextBootstrap},
		{"kubeadm-capd", render.ContextWorkload},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		res, err := r.Render(t.Context(), render.Options{Env: testenv.Environment(t, root, c.env), Context: c.context})
		if err != nil {
			t.Fatal(err)
		}
		var kss []*unstructured.Unstructured
		for _, o := range res.Objects {
			if o.Object.GetKind() == "Kustomization" && o.Object.GetAPIVersion() == "kustomize.toolkit.fluxcd.io/v1" && o.Unit == "" {
				data, _ := json.Marshal(o.Object.Object["spec"])
				if !seen[string(data)] {
					seen[string(data)] = true
					kss = append(kss, o.Object)
				}
			}
		}
		got := make([][]*unstructured.Unstructured, len(kss))
		var wg sync.WaitGroup
		for i, ks := range kss {
			wg.Go(func() {
				objs, err := b.Build(t.Context(), ks)
				if err != nil {
					t.Errorf("%s: %v", ks.GetName(), err)
				}
				got[i] = objs
			})
		}
		wg.Wait()
		for i, ks := range kss {
			want := controllerBuild(t, reference, ks)
			if len(got[i]) != len(want) || len(want) > 0 && !reflect.DeepEqual(got[i], want) {
				t.Errorf("%s %s: unit %s: the builder's %d objects differ from the controller's %d", c.env, c.context, ks.GetName(), len(got[i]), len(want))
			}
		}
	}
	if len(seen) < 15 {
		t.Errorf("only %d distinct unit builds compared", len(seen))
	}
}

// A build is kept by content: the same Kustomization is built once, and every caller gets objects
// of its own.
func TestBuildIsKeptAndCopied(t *testing.T) {
	root := testenv.Checkout(t)
	snap := t.TempDir()
	if err := source.Snapshot(root, snap); err != nil {
		t.Fatal(err)
	}
	b, err := kustomize.NewBuilder(snap)
	if err != nil {
		t.Fatal(err)
	}
	ks := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "gate", "namespace": "cluster-init"},
		"spec":     map[string]any{"path": "./kustomize-components/capd"},
	}}
	first, err := b.Build(t.Context(), ks)
	if err != nil {
		t.Fatal(err)
	}
	// A change to the tree after the first build is not seen: the build was kept.
	if err := os.WriteFile(snap+"/kustomize-components/capd/kustomization.yaml", []byte("resources: [missing.yaml]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	first[0].SetName("changed by the caller")
	second, err := b.Build(t.Context(), ks)
	if err != nil {
		t.Fatalf("second build was not kept: %v", err)
	}
	if second[0].GetName() == "changed by the caller" {
		t.Error("callers share the kept objects")
	}
}

// Builds kept on disk are read back by another builder of the same tree, never by a builder of a
// changed tree; a damaged entry is built again.
func TestBuildsKeptOnDisk(t *testing.T) {
	root := testenv.Checkout(t)
	snap := t.TempDir()
	if err := source.Snapshot(root, snap); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	ks := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "capd", "namespace": "cluster-init"},
		"spec":     map[string]any{"path": "./kustomize-components/capd"},
	}}
	build := func() []*unstructured.Unstructured {
		t.Helper()
		b, err := kustomize.NewBuilder(snap, kustomize.WithDiskCache(cache))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := b.Build(t.Context(), ks)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	entries := func() []string {
		t.Helper()
		m, _ := filepath.Glob(filepath.Join(cache, "*.json.gz"))
		return m
	}
	first := build()
	if len(entries()) != 1 {
		t.Fatalf("entries after a build: %v", entries())
	}
	// Another process, the same tree: read back, equal to the build.
	if again := build(); !reflect.DeepEqual(first, again) {
		t.Fatal("the build read back differs")
	}
	// It is read, not built again: an entry marked by hand comes back marked.
	marked := first[0].DeepCopy()
	marked.SetLabels(map[string]string{"read-from": "disk"})
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_ = json.NewEncoder(zw).Encode([]map[string]any{marked.Object})
	_ = zw.Close()
	if err := os.WriteFile(entries()[0], buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := build(); len(got) != 1 || got[0].GetLabels()["read-from"] != "disk" {
		t.Fatal("the kept build was not read")
	}
	// A changed tree never reads an old build.
	crd := filepath.Join(snap, "kustomize-components/capd/kustomization.yaml")
	orig, _ := os.ReadFile(crd)
	if err := os.WriteFile(crd, append(orig, []byte("commonLabels: {changed: \"yes\"}\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := build()
	if len(entries()) != 2 || changed[0].GetLabels()["changed"] != "yes" {
		t.Fatalf("a changed tree: %d entries, labels %v", len(entries()), changed[0].GetLabels())
	}
	// A damaged entry costs a build, not an error.
	for _, e := range entries() {
		if err := os.WriteFile(e, []byte("not gzip"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if again := build(); !reflect.DeepEqual(changed, again) {
		t.Fatal("a damaged entry was not built again")
	}
}
