package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"cluster-init.dev/cluster-init/internal/images"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/render"
)

// prepullBootstrap has the kind cluster's node pull, in the background, the images its Flux and
// units will run, in the order they will need them. The kubelet pulls an image only once a pod
// needs it, one image at a time, so each level of the units would wait for its own pulls in turn
// (Flux's alone took 5–8 s on the test bed); pulled while the CNI starts, when the node has little
// else to do, they are there when the pods are scheduled. An image that fails is left to the
// kubelet, and a unit that cannot get it says why.
//
// The machines of a management cluster are not pre-pulled: on the test bed, pulling into CAPD
// machines while they run kubeadm slowed their bootstrap by as much as it saved.
func prepullBootstrap(ctx context.Context, s *session, kind *kindcluster.Manager, cluster string, list []string) {
	if len(list) == 0 {
		return
	}
	s.background(ctx, func(ctx context.Context) {
		nodeList, err := kind.Nodes(cluster)
		if err != nil {
			s.out.Log("not pre-pulling images into the bootstrap cluster: %v", err)
			return
		}
		for _, n := range nodeList {
			pullAll(ctx, s, n, list)
		}
	})
}

// pullAll has node pull list in order and says how it went.
func pullAll(ctx context.Context, s *session, n nodes.Node, list []string) {
	start := time.Now()
	pulled := 0
	var failed error
	for _, image := range list {
		err := kindcluster.PullImage(ctx, n, image)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failed = err
			continue
		}
		pulled++
	}
	took := time.Since(start).Round(time.Second)
	if failed != nil {
		s.out.Log("pre-pulled %d of %d images into %s in %s (the kubelet pulls the others when needed; last failure: %v)", pulled, len(list), n, took, failed)
		return
	}
	s.out.Log("pre-pulled %d images into %s in %s", pulled, n, took)
}

// bootstrapImages are the images the kind cluster runs, in the order it needs them: Flux's, then
// each unit's in the order of the graph but those of the units applied into another cluster
// through a kubeconfig. loaded is the image the CLI loads from the local Docker engine itself.
func bootstrapImages(ctx context.Context, s *session, plan *render.Result, loaded string) ([]string, error) {
	flux, err := s.renderer.BootstrapFlux(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the images of Flux: %w", err)
	}
	groups, err := unitObjects(plan)
	if err != nil {
		return nil, err
	}
	return orderedImages(append([][]*unstructured.Unstructured{flux}, groups...), loaded), nil
}

// unitObjects are the objects of each unit of res in the order of its graph, but of the units
// applied into another cluster through a kubeconfig.
func unitObjects(res *render.Result) ([][]*unstructured.Unstructured, error) {
	if res.Graph == nil {
		return nil, errors.New("the render has no unit graph")
	}
	byUnit := map[string][]*unstructured.Unstructured{}
	for _, o := range res.Objects {
		byUnit[o.Unit] = append(byUnit[o.Unit], o.Object)
	}
	var groups [][]*unstructured.Unstructured
	for _, name := range res.Graph.Order {
		if u := res.Graph.Units[name]; u != nil && !u.Kubeconfig {
			groups = append(groups, byUnit[name])
		}
	}
	return groups, nil
}

// orderedImages lists the images of groups, group after group, each once, but skip.
func orderedImages(groups [][]*unstructured.Unstructured, skip string) []string {
	seen := map[string]bool{skip: true}
	var out []string
	for _, objs := range groups {
		for _, u := range images.FromObjects(objs) {
			if !seen[u.Image] {
				seen[u.Image] = true
				out = append(out, u.Image)
			}
		}
	}
	return out
}
