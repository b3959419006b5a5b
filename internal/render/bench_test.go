package render_test

import (
	"testing"

	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// BenchmarkRender renders each environment in its first context: values, umbrella chart, every
// unit's kustomize build and the HelmRelease charts.
func BenchmarkRender(b *testing.B) {
	root := testenv.Checkout(b)
	for _, name := range []string{"kubeadm-capd", "rke2-capd", "kubeadm-capo", "rke2-capo", "workload-clusters/kubeadm-capd-workload"} {
		env := testenv.Environment(b, root, name)
		context := render.ContextBootstrap
		if env.Workload() {
			context = render.ContextWorkload
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			objects := 0
			for b.Loop() {
				res := renderEnv(b, root, env, context)
				objects = len(res.Objects)
			}
			b.ReportMetric(float64(objects), "objects")
		})
	}
}
