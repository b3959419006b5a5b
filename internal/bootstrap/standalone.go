package bootstrap

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/standalone"
	"cluster-init.dev/cluster-init/internal/values"
)

// The flows of standalone clusters live beside their state, in internal/standalone; this file
// runs them in a session (the output, the timeline, --until and --timeout, the bootstrap flow
// that creates the cluster).

// standaloneValues make the release define a cluster with no management in it and no pivot.
func standaloneValues() values.Layer {
	return values.FromMap("(--standalone)", map[string]any{"pivot": false, "standalone": true})
}

// newCreating is the hold of a standalone creation on its state.
func newCreating(s *session, key *standalone.Key) *standalone.Creating {
	return &standalone.Creating{
		Root: s.opts.StateDir.Standalone(), Env: s.opts.Env.Name, Key: key, Out: s.out,
		Temporary: standalone.NewTemporary(s.opts.StateDir.KindClusters(), s.out, s.stopBackground),
	}
}

// keepStandalone is the last phase of a standalone creation: the cluster kept in the state
// directory, the bootstrap cluster deleted.
func keepStandalone(ctx context.Context, s *session, bc *bootstrapCluster, plan *render.Result, c *standalone.Creating, opts StandaloneOptions) error {
	cni, err := bootstrapCNI(ctx, s, plan.Settings)
	if err != nil {
		return fmt.Errorf("keep what manages standalone cluster %s: %w", plan.Settings.Cluster.Name, err)
	}
	merged, err := yaml.Marshal(plan.Merged)
	if err != nil {
		return err
	}
	src, _ := plan.Merged["source"].(map[string]any)
	if err := c.Keep(ctx, standalone.Created{
		Settings: plan.Settings, Merged: merged, Source: src, Versions: opts.Versions,
		CNI: cni, Graph: plan.Graph, ObjectsOf: func(unit string) []*unstructured.Unstructured {
			var objs []*unstructured.Unstructured
			for _, o := range plan.Objects {
				if o.Unit == unit {
					objs = append(objs, o.Object)
				}
			}
			return objs
		},
		Management: bc.cluster, KeepBootstrap: opts.KeepBootstrap,
	}); err != nil {
		return err
	}
	if !opts.KeepBootstrap {
		s.result.Management = c.KubeconfigPath()
	}
	return nil
}

// Manage runs the change of a standalone cluster (standalone.Changing): management brought back
// in a temporary kind cluster for the time of the change. Run again after an interruption, it
// finishes the change.
func Manage(ctx context.Context, mo ManageOptions) (*Result, error) {
	opts := mo.Common
	s, err := newSession(opts, "")
	if err != nil {
		return &Result{}, err
	}
	defer s.close()
	f := &standalone.Changing{
		Root: opts.StateDir.Standalone(), Env: opts.Env.Name, Key: mo.Key, Change: mo.Change, Out: s.out,
		Temporary: standalone.NewTemporary(opts.StateDir.KindClusters(), s.out, s.stopBackground),
	}
	defer f.Close()
	var phases []phase
	for _, p := range f.Phases() {
		phases = append(phases, phase{p.Name, p.Run})
	}
	res, err := s.run(ctx, "", phases)
	if note := f.Interrupted(); err != nil && note != "" {
		s.out.Log("%s", note)
	}
	return res, err
}
