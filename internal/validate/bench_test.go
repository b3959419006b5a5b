package validate_test

import (
	"testing"

	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/validate"
	"cluster-init.dev/cluster-init/internal/versions"
)

// BenchmarkValidate is what `bootstrap validate ENV` costs once the process runs: a new renderer,
// the environment rendered in each of its contexts, every object checked against its schema.
func BenchmarkValidate(b *testing.B) {
	root := testenv.Checkout(b)
	pins, err := versions.Load(root)
	if err != nil {
		b.Fatal(err)
	}
	env := testenv.Environment(b, root, "kubeadm-capd")
	b.ReportAllocs()
	for b.Loop() {
		r, err := render.New(root, pins["KUBERNETES_VERSION"], "")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := validate.Environment(b.Context(), r, root, render.Options{Env: env}); err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}

// BenchmarkValidateWithBuildCache is `bootstrap validate ENV` as the CLI runs it a second time on
// an unchanged source: unit builds and vendored CRDs read from the disk cache.
func BenchmarkValidateWithBuildCache(b *testing.B) {
	root := testenv.Checkout(b)
	pins, err := versions.Load(root)
	if err != nil {
		b.Fatal(err)
	}
	env := testenv.Environment(b, root, "kubeadm-capd")
	cache := b.TempDir()
	validate1 := func() {
		r, err := render.New(root, pins["KUBERNETES_VERSION"], cache)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		if _, err := validate.Environment(b.Context(), r, root, render.Options{Env: env}); err != nil {
			b.Fatal(err)
		}
	}
	validate1()
	b.ReportAllocs()
	for b.Loop() {
		validate1()
	}
}
