package render_test

import (
	"testing"

	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
)

var benchEnvironments = []string{"kubeadm-capd", "rke2-capd", "kubeadm-capo", "rke2-capo"}

// BenchmarkRender is what `bootstrap render ENV` costs once the process runs: a new renderer (the
// snapshot of the source), the values, the umbrella chart, every unit's kustomize build and the
// HelmRelease charts, in the environment's first context. Kustomize's built-in OpenAPI schema is
// loaded once per process, by the first iteration.
func BenchmarkRender(b *testing.B) {
	root := testenv.Checkout(b)
	kv := kubeVersion(b, root)
	for _, name := range benchEnvironments {
		env := testenv.Environment(b, root, name)
		context := render.ContextBootstrap
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			objects := 0
			for b.Loop() {
				res, err := render.Render(b.Context(), root, kv, render.Options{Env: env, Context: context})
				if err != nil {
					b.Fatal(err)
				}
				objects = len(res.Objects)
			}
			b.ReportMetric(float64(objects), "objects")
		})
	}
}

// BenchmarkRenderAgain is a render by a renderer that has rendered the environment before: what
// each further context costs within one command (validate renders three; bootstrap renders the
// release again with its source), every unit build kept by content.
func BenchmarkRenderAgain(b *testing.B) {
	root := testenv.Checkout(b)
	env := testenv.Environment(b, root, "kubeadm-capd")
	r, err := render.New(root, kubeVersion(b, root), "")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	opts := render.Options{Env: env, Context: render.ContextBootstrap}
	if _, err := r.Render(b.Context(), opts); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Render(b.Context(), opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderWithBuildCache is `bootstrap render ENV` as the CLI runs it a second time: a new
// renderer whose unit builds are kept on disk from an earlier command of the same tree.
func BenchmarkRenderWithBuildCache(b *testing.B) {
	root := testenv.Checkout(b)
	kv := kubeVersion(b, root)
	env := testenv.Environment(b, root, "kubeadm-capd")
	cache := b.TempDir()
	opts := render.Options{Env: env, Context: render.ContextBootstrap}
	render1 := func() {
		r, err := render.New(root, kv, cache)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		if _, err := r.Render(b.Context(), opts); err != nil {
			b.Fatal(err)
		}
	}
	render1()
	b.ReportAllocs()
	for b.Loop() {
		render1()
	}
}
