package bootstrap

import (
	"slices"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// The kind cluster pre-pulls what it runs, in the order it needs it: Flux's controllers, then the
// units of the graph in order; never the images of the units applied into the management cluster,
// nor the image the CLI loads itself.
func TestBootstrapImagesComeInTheOrderTheClusterNeedsThem(t *testing.T) {
	root := testenv.Checkout(t)
	r, err := render.New(root, "v1.37.0", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	s := &session{renderer: r}
	plan, err := r.Render(t.Context(), render.Options{Env: testenv.Environment(t, root, "kubeadm-capd"), Context: render.ContextBootstrap})
	if err != nil {
		t.Fatal(err)
	}
	list, err := bootstrapImages(t.Context(), s, plan, plan.Settings.ClusterInitImage)
	if err != nil {
		t.Fatal(err)
	}
	index := func(part string) int {
		return slices.IndexFunc(list, func(img string) bool { return strings.Contains(img, part) })
	}
	order := []string{"/kustomize-controller:", "/cert-manager-webhook:", "/cluster-api-controller:", "/kubeadm-control-plane-controller:"}
	for i, part := range order {
		at := index(part)
		if at < 0 {
			t.Fatalf("no image %s among %v", part, list)
		}
		if i > 0 && at < index(order[i-1]) {
			t.Errorf("%s comes before %s in %v: the cluster needs it after", part, order[i-1], list)
		}
	}
	for _, never := range []string{"/flannel:", plan.Settings.ClusterInitImage} {
		if at := index(never); at >= 0 {
			t.Errorf("%s is pulled into the kind cluster (%v): it is applied elsewhere or loaded", never, list)
		}
	}
	seen := map[string]bool{}
	for _, img := range list {
		if seen[img] {
			t.Errorf("%s twice in %v", img, list)
		}
		seen[img] = true
	}
}
