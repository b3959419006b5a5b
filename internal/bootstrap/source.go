package bootstrap

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/localregistry"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/pivot"
	"cluster-init.dev/cluster-init/internal/source"
	"cluster-init.dev/cluster-init/internal/values"
)

// publishedSource is where the clusters read the checkout from.
type publishedSource struct {
	// values are the `source` values pointing at it.
	values map[string]any
	// pivotStarted: a previous run's pivot has started; the bootstrap cluster is frozen and keeps
	// what was published then.
	pivotStarted bool
}

// publishSource makes the checkout reachable by the clusters: pushed next to kind (oci) or as the
// checkout's commit (git).
func publishSource(ctx context.Context, s *session, bc *bootstrapCluster, v values.Settings) (*publishedSource, error) {
	// Once the pivot has started, the bootstrap cluster is frozen: a new revision would reach units
	// it suspended and the pivot Job; keep what is published.
	if bc.kind != nil {
		st, err := pivot.ReadState(ctx, bc.cluster.Client, names.Namespace)
		if err != nil {
			return nil, err
		}
		if st.Started() {
			vals, err := sourceApplied(ctx, bc)
			if err != nil {
				return nil, err
			}
			s.out.Log("the pivot has started (done: %s): keeping the published source", strings.Join(st.Done, ", "))
			return &publishedSource{values: vals, pivotStarted: true}, nil
		}
	}
	switch s.opts.Source {
	case "oci":
		reg := localregistry.Registry{
			Name:     v.BootstrapCluster.Registry.Name,
			Image:    v.BootstrapCluster.Registry.Image,
			Network:  "kind",
			HostPort: v.BootstrapCluster.Registry.HostPort,
		}
		if err := reg.Ensure(ctx); err != nil {
			return nil, err
		}
		rev := source.Revision(ctx, s.opts.RepoRoot)
		pub, err := source.PushOCI(ctx, s.renderer.Snapshot(), source.OCITarget{PushAddress: reg.PushAddress(), ClusterAddress: reg.ClusterAddress(), Repository: names.SourceRepository}, rev)
		if err != nil {
			return nil, err
		}
		if rev == "" {
			rev = "not a git checkout"
		}
		s.out.Log("pushed the checkout (%s) to %s/%s as %s, with charts %s", rev, reg.PushAddress(), names.SourceRepository, pub.Tag, strings.Join(pub.Charts, ", "))
		return &publishedSource{values: pub.Values}, nil
	case "git":
		url := ""
		if v.Source.Type == "git" {
			url = v.Source.URL
		}
		vals, err := source.Git(ctx, s.opts.RepoRoot, url)
		if err != nil {
			return nil, err
		}
		s.out.Log("the clusters reconcile from %s at %s", vals["url"], vals["ref"].(map[string]any)["commit"])
		return &publishedSource{values: vals}, nil
	default:
		return nil, fmt.Errorf("--source: unknown source %q, expected oci or git", s.opts.Source)
	}
}

// sourceApplied reads the source values a previous run applied.
func sourceApplied(ctx context.Context, bc *bootstrapCluster) (map[string]any, error) {
	cm := &corev1.ConfigMap{}
	if err := bc.cluster.Client.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: names.SourceConfigMap}, cm); err != nil {
		return nil, fmt.Errorf("the published source: %w", err)
	}
	var vals struct {
		Source map[string]any `json:"source"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data[names.ValuesKey]), &vals); err != nil {
		return nil, fmt.Errorf("the published source: %w", err)
	}
	return vals.Source, nil
}
