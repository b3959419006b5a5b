package bootstrap

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/envmarker"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/standalone"
	"cluster-init.dev/cluster-init/internal/values"
)

// bootstrapCluster is the cluster whose units a run follows: the kind cluster the run created (or
// found), an existing one given with --kubeconfig, or for day 2 the management cluster.
type bootstrapCluster struct {
	cluster *kube.Cluster
	// kind manages the kind cluster; nil when the cluster is not one of ours.
	kind *kindcluster.Manager
}

// existingCluster is a cluster given with --kubeconfig (and --kube-context); empty, none.
type existingCluster struct{ kubeconfig, context string }

// ensureBootstrapCluster creates (or finds) the kind cluster, installs the CNI and, while the CNI
// starts, loads this project's image into it and starts pulling the images of its Flux and units
// (prepull); or connects to the existing cluster given with --kubeconfig.
func ensureBootstrapCluster(ctx context.Context, s *session, plan *render.Result, existing existingCluster) (*bootstrapCluster, error) {
	v := plan.Settings
	env := s.opts.Env.Name
	if existing.kubeconfig != "" {
		c, err := kube.Load("bootstrap", existing.kubeconfig, existing.context)
		if err != nil {
			return nil, err
		}
		if err := envmarker.Check(ctx, c.Client, env); err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", existing.kubeconfig, err)
		}
		// A management cluster must not bootstrap its own environment: it would create a second
		// cluster of the same name next to itself.
		if st, _, err := managementstate.Read(ctx, c.Client); err != nil {
			return nil, err
		} else if st.Managed() {
			return nil, fmt.Errorf("--kubeconfig %s is the management cluster of %s, %s: change it with `bootstrap apply %s`", existing.kubeconfig, env, st, env)
		}
		if err := envmarker.Write(ctx, c.Client, env); err != nil {
			return nil, err
		}
		s.out.Log("using the existing cluster of %s (no kind cluster, no pivot)", existing.kubeconfig)
		return &bootstrapCluster{cluster: c}, nil
	}

	cfg := standalone.BootstrapClusterOf(v).Kind(env)
	for _, w := range kindcluster.HostWarnings("/proc/sys") {
		s.out.Log("warning: %s", w)
	}
	kind := kindcluster.New(s.opts.StateDir.KindClusters(), func(msg string) { s.out.Log("kind: %s", strings.TrimSpace(msg)) })
	if exists, err := kind.Exists(cfg.Name); err != nil {
		return nil, err
	} else if exists {
		s.out.Log("kind cluster %s exists: continuing with it", cfg.Name)
	} else {
		s.out.Log("creating kind cluster %s (node image %s, pods %s, services %s, %d registry mirrors)",
			cfg.Name, cfg.NodeImage, cfg.PodSubnet, cfg.ServiceSubnet, len(cfg.Mirrors))
	}
	c, _, err := kind.Ensure(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.result.Bootstrap = kind.KubeconfigPath(cfg.Name)
	s.out.Log("kubeconfig of the bootstrap cluster: %s", s.result.Bootstrap)
	pulls, err := bootstrapImages(ctx, s, plan, v.ClusterInitImage)
	if err != nil {
		return nil, err
	}
	prepullBootstrap(ctx, s, kind, cfg.Name, pulls)

	objs, err := bootstrapCNI(ctx, s, v)
	if err != nil {
		return nil, err
	}
	s.out.Log("installing flannel (%s) into the bootstrap cluster", v.Cluster.CNI.FlannelBackend)
	cs, err := apply.New(c).Apply(ctx, objs)
	if err != nil {
		return nil, fmt.Errorf("apply the CNI of the bootstrap cluster: %w", err)
	}
	s.logChanges(cs)
	// While flannel starts: the image of the Jobs the units run.
	if loaded, err := kind.LoadImage(ctx, cfg.Name, v.ClusterInitImage); err != nil {
		return nil, err
	} else if loaded {
		s.out.Log("loaded %s from the local Docker engine", v.ClusterInitImage)
	}
	// Flux comes after: pods created before the pod network works wait out the kubelet's back-off
	// (flannel's configuration, written once it has its lease, keeps CoreDNS's from starting
	// sooner: Flux waits for it, see installFlux).
	if err := waitReady(ctx, s, c, "the CNI", objs, 5*time.Minute); err != nil {
		return nil, err
	}
	return &bootstrapCluster{cluster: c, kind: kind}, nil
}

// bootstrapCNI is the pod network of the kind cluster: the same CNI as every cluster's.
func bootstrapCNI(ctx context.Context, s *session, v values.Settings) ([]*unstructured.Unstructured, error) {
	return s.renderer.Build(ctx, "bootstrap-cni", "./kustomize-components/cni/flannel-"+v.Cluster.CNI.FlannelBackend,
		map[string]string{"POD_CIDR": v.BootstrapCluster.PodsCIDR})
}

// applyAndWait applies objs and waits until every object of wait is ready, showing what is not.
func applyAndWait(ctx context.Context, s *session, c *kube.Cluster, what string, objs, wait []*unstructured.Unstructured, timeout time.Duration) error {
	cs, err := apply.New(c).Apply(ctx, objs)
	if err != nil {
		return err
	}
	s.logChanges(cs)
	return waitReady(ctx, s, c, what, wait, timeout)
}

// waitReady waits until every object of wait is ready, showing what is not.
func waitReady(ctx context.Context, s *session, c *kube.Cluster, what string, wait []*unstructured.Unstructured, timeout time.Duration) error {
	return readiness.Wait(ctx, c, wait, timeout, func(pending []readiness.NotReady) {
		if lines := readiness.Lines(pending); len(lines) > 0 {
			s.out.Waiting(what, lines)
		}
	})
}
