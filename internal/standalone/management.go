package standalone

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/units"
)

// storeManagement keeps what a temporary management cluster runs: the bootstrap cluster's CNI,
// then every unit the cluster definitions depend on (cert-manager, Cluster API, the providers),
// as built now. Bringing management back then needs no checkout, and runs the versions that
// created the cluster.
func (d Dir) storeManagement(k *Key, cni []*unstructured.Unstructured, g *units.Graph, objectsOf func(unit string) []*unstructured.Unstructured) ([]ManagementUnit, error) {
	if err := d.storeUnit(k, CNIUnit, cni); err != nil {
		return nil, err
	}
	out := []ManagementUnit{{Name: CNIUnit}}
	cu, ok := g.ByRole(units.RoleCluster)
	if !ok {
		return nil, errors.New("the release defines no cluster (no unit of role cluster)")
	}
	for _, name := range g.DependenciesOf(cu.Name) {
		u := g.Units[name]
		objs := objectsOf(name)
		if len(objs) == 0 {
			return nil, fmt.Errorf("unit %s: no objects rendered", name)
		}
		if err := d.storeUnit(k, name, objs); err != nil {
			return nil, err
		}
		mu := ManagementUnit{Name: name, WaitFor: []string{CNIUnit}}
		for _, dep := range u.DependsOn {
			if !u.NeedsOnlyApplied(dep) {
				mu.WaitFor = append(mu.WaitFor, dep)
			}
		}
		out = append(out, mu)
	}
	return out, nil
}

func (d Dir) storeUnit(k *Key, name string, objs []*unstructured.Unstructured) error {
	var buf bytes.Buffer
	hasSecret := false
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("unit %s: %w", name, err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
		hasSecret = hasSecret || (o.GetKind() == "Secret" && o.GetAPIVersion() == "v1")
	}
	return d.StoreManagement(k, name, buf.Bytes(), hasSecret)
}

// managementObjects reads the objects of a management unit of the state.
func (d Dir) managementObjects(k *Key, unit string) ([]*unstructured.Unstructured, error) {
	data, err := d.ManagementObjects(k, unit)
	if err != nil {
		return nil, err
	}
	objs, err := ssautil.ReadObjects(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("management unit %s of the state: %w", unit, err)
	}
	return objs, nil
}

// ensureTemporary creates (or finds) the temporary management cluster with its CNI.
func (t Temporary) ensure(ctx context.Context, out Reporter, d Dir, k *Key, st *State) (*kube.Cluster, error) {
	cfg := st.BootstrapCluster.Kind(st.Environment)
	if exists, err := t.Kind.Exists(cfg.Name); err != nil {
		return nil, err
	} else if exists {
		out.Log("temporary management cluster %s exists: continuing with it", cfg.Name)
	} else {
		out.Log("creating the temporary management cluster %s (node image %s, %d registry mirrors)", cfg.Name, cfg.NodeImage, len(cfg.Mirrors))
	}
	c, _, err := t.Kind.Ensure(ctx, cfg)
	if err != nil {
		return nil, err
	}
	objs, err := d.managementObjects(k, CNIUnit)
	if err != nil {
		return nil, err
	}
	cs, err := apply.New(c).Apply(ctx, objs)
	if err != nil {
		return nil, fmt.Errorf("apply the CNI of the temporary management cluster: %w", err)
	}
	out.Log("applied the CNI: %d objects", len(cs.Entries))
	if err := waitReady(ctx, out, c, "the CNI", objs, 5*time.Minute); err != nil {
		return nil, fmt.Errorf("the CNI of the temporary management cluster: %w", err)
	}
	return c, nil
}

// applyManagement applies the providers in order, each once the units it needs ready are, and
// waits until every one is ready.
func applyManagement(ctx context.Context, out Reporter, d Dir, k *Key, st *State, mc *kube.Cluster) error {
	applied := map[string][]*unstructured.Unstructured{}
	ready := map[string]bool{CNIUnit: true}
	waitFor := func(names []string) error {
		for _, n := range names {
			if ready[n] {
				continue
			}
			if err := waitReady(ctx, out, mc, "unit "+n, applied[n], 10*time.Minute); err != nil {
				return fmt.Errorf("unit %s in the temporary management cluster: %w", n, err)
			}
			out.Log("unit %s is ready", n)
			ready[n] = true
		}
		return nil
	}
	var all []string
	for _, u := range st.ManagementUnits {
		if u.Name == CNIUnit {
			continue
		}
		if err := waitFor(u.WaitFor); err != nil {
			return err
		}
		objs, err := d.managementObjects(k, u.Name)
		if err != nil {
			return err
		}
		out.Log("applying unit %s (%d objects)", u.Name, len(objs))
		if _, err := apply.New(mc).Apply(ctx, objs); err != nil {
			return fmt.Errorf("apply unit %s to the temporary management cluster: %w", u.Name, err)
		}
		applied[u.Name] = objs
		all = append(all, u.Name)
	}
	return waitFor(all)
}

// waitReady waits until every object of wait is ready, saying what is not.
func waitReady(ctx context.Context, out Reporter, c *kube.Cluster, what string, wait []*unstructured.Unstructured, timeout time.Duration) error {
	return readiness.Wait(ctx, c, wait, timeout, func(pending []readiness.NotReady) {
		if lines := readiness.Lines(pending); len(lines) > 0 {
			out.Waiting(what, lines)
		}
	})
}
