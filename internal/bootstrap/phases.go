package bootstrap

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/kustomize"
	"cluster-init.dev/cluster-init/internal/localregistry"
	"cluster-init.dev/cluster-init/internal/registrymirror"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/source"
	"cluster-init.dev/cluster-init/internal/validate"
)

func (f *flow) renderOptions(context string) render.Options {
	return render.Options{RepoRoot: f.opts.RepoRoot, Env: f.opts.Env, Context: context, Overrides: f.opts.Overrides,
		Source: f.source, KubeVersion: f.opts.KubeVersion}
}

// validate checks the environment in every context before anything is created.
func (f *flow) validate(ctx context.Context) error {
	if f.opts.Kubeconfig == "" {
		if err := alreadyBootstrapped(ctx, f.opts.StateDir, f.opts.Env.Name); err != nil {
			return err
		}
	}
	reports, err := validate.Environment(ctx, f.renderOptions(""))
	if err != nil {
		return fmt.Errorf("environment %s is invalid, nothing was created:\n%w", f.opts.Env.Name, err)
	}
	for _, r := range reports {
		f.out.Log("%s: %d units, %d objects valid", r.Target, r.Units, r.Objects)
	}
	res, err := render.Render(ctx, f.renderOptions(render.ContextBootstrap))
	if err != nil {
		return err
	}
	f.values = res.Values
	return nil
}

// bootstrapCluster creates (or finds) the kind cluster, loads this project's image into it and
// installs the CNI; or connects to the existing cluster given with --kubeconfig.
func (f *flow) bootstrapCluster(ctx context.Context) error {
	env := f.opts.Env.Name
	if f.opts.Kubeconfig != "" {
		c, err := kube.FromFile("bootstrap", f.opts.Kubeconfig)
		if err != nil {
			return err
		}
		if err := kindcluster.CheckMarker(ctx, c, env); err != nil {
			return fmt.Errorf("--kubeconfig %s: %w", f.opts.Kubeconfig, err)
		}
		if err := kindcluster.WriteMarker(ctx, c, env); err != nil {
			return err
		}
		f.bootstrap = c
		f.out.Log("using the existing cluster of %s (no kind cluster, no pivot)", f.opts.Kubeconfig)
		return nil
	}

	mirrors, err := registrymirror.FromValues(f.values)
	if err != nil {
		return err
	}
	cfg := kindcluster.Config{
		Name:          nestedString(f.values, "bootstrap_cluster", "name"),
		NodeImage:     nestedString(f.values, "bootstrap_cluster", "node_image"),
		PodSubnet:     nestedString(f.values, "bootstrap_cluster", "pods_cidr"),
		ServiceSubnet: nestedString(f.values, "bootstrap_cluster", "services_cidr"),
		Mirrors:       mirrors,
		Environment:   env,
	}
	f.kind = kindcluster.New(f.opts.StateDir, func(msg string) { f.out.Log("kind: %s", strings.TrimSpace(msg)) })
	if exists, err := f.kind.Exists(cfg.Name); err != nil {
		return err
	} else if exists {
		f.out.Log("kind cluster %s exists: continuing with it", cfg.Name)
	} else {
		f.out.Log("creating kind cluster %s (node image %s, pods %s, services %s, %d registry mirrors)",
			cfg.Name, cfg.NodeImage, cfg.PodSubnet, cfg.ServiceSubnet, len(mirrors))
	}
	c, _, err := f.kind.Ensure(ctx, cfg)
	if err != nil {
		return err
	}
	f.bootstrap = c
	f.result.Bootstrap = f.kind.KubeconfigPath(cfg.Name)
	f.out.Log("kubeconfig of the bootstrap cluster: %s", f.result.Bootstrap)

	img := nestedString(f.values, "cluster_init_image")
	if loaded, err := f.kind.LoadImage(ctx, cfg.Name, img); err != nil {
		return err
	} else if loaded {
		f.out.Log("loaded %s from the local Docker engine", img)
	}

	backend := nestedString(f.values, "cluster", "cni", "flannel_backend")
	objs, err := f.build(ctx, "bootstrap-cni", "./kustomize-components/cni/flannel-"+backend, map[string]string{"POD_CIDR": cfg.PodSubnet})
	if err != nil {
		return err
	}
	f.out.Log("installing flannel (%s) into the bootstrap cluster", backend)
	// CoreDNS runs once pods have a network: waiting for it proves the CNI works.
	coredns := &unstructured.Unstructured{}
	coredns.SetAPIVersion("apps/v1")
	coredns.SetKind("Deployment")
	coredns.SetNamespace("kube-system")
	coredns.SetName("coredns")
	return f.applyAndWait(ctx, c, "the CNI", objs, append(objs, coredns), 5*time.Minute)
}

// installFlux applies Flux from kustomize-components/flux-system and waits for it.
func (f *flow) installFlux(ctx context.Context) error {
	objs, err := f.build(ctx, "flux-system", "./kustomize-components/flux-system", nil)
	if err != nil {
		return err
	}
	return f.applyAndWait(ctx, f.bootstrap, "Flux", objs, objs, 5*time.Minute)
}

// publishSource makes the checkout reachable by the clusters: pushed next to kind (oci) or as
// the checkout's commit (git).
func (f *flow) publishSource(ctx context.Context) error {
	// Once the pivot has started, the bootstrap cluster is frozen: a new revision would reach
	// units it suspended and the pivot Job; keep what is published.
	if f.bootstrap != nil && f.kind != nil {
		if done, err := f.pivotSteps(ctx); err != nil {
			return err
		} else if len(done) > 0 {
			src, err := f.publishedSource(ctx)
			if err != nil {
				return err
			}
			f.source = src
			f.pivotStarted = true
			f.out.Log("the pivot has started (done: %s): keeping the published source", strings.Join(done, ", "))
			return nil
		}
	}
	switch f.opts.Source {
	case "oci":
		reg := localregistry.Registry{
			Name:     nestedString(f.values, "bootstrap_cluster", "registry", "name"),
			Image:    nestedString(f.values, "bootstrap_cluster", "registry", "image"),
			Network:  "kind",
			HostPort: nestedInt(f.values, "bootstrap_cluster", "registry", "host_port"),
		}
		if err := reg.Ensure(ctx); err != nil {
			return err
		}
		snap, err := os.MkdirTemp("", "cluster-init-source-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(snap)
		if err := source.Snapshot(f.opts.RepoRoot, snap); err != nil {
			return err
		}
		rev := source.Revision(ctx, f.opts.RepoRoot)
		pub, err := source.PushOCI(ctx, snap, source.OCITarget{PushAddress: reg.PushAddress(), ClusterAddress: reg.ClusterAddress(), Repository: "cluster-init"}, rev)
		if err != nil {
			return err
		}
		f.source = pub.Values
		f.out.Log("pushed the checkout (%s) to %s/cluster-init as %s, with charts %s", orUnknown(rev), reg.PushAddress(), pub.Tag, strings.Join(pub.Charts, ", "))
	case "git":
		url := ""
		if nestedString(f.values, "source", "type") == "git" {
			url = nestedString(f.values, "source", "url")
		}
		vals, err := source.Git(ctx, f.opts.RepoRoot, url)
		if err != nil {
			return err
		}
		f.source = vals
		f.out.Log("the clusters reconcile from %s at %s", vals["url"], vals["ref"].(map[string]any)["commit"])
	default:
		return fmt.Errorf("--source: unknown source %q, expected oci or git", f.opts.Source)
	}
	return nil
}

// publishedSource reads the source values applied by a previous run.
func (f *flow) publishedSource(ctx context.Context) (map[string]any, error) {
	cm := &corev1.ConfigMap{}
	if err := f.bootstrap.Client.Get(ctx, client.ObjectKey{Namespace: environment.Namespace, Name: render.SourceConfigMap}, cm); err != nil {
		return nil, fmt.Errorf("the published source: %w", err)
	}
	var vals struct {
		Source map[string]any `json:"source"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["values.yaml"]), &vals); err != nil {
		return nil, fmt.Errorf("the published source: %w", err)
	}
	return vals.Source, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "not a git checkout"
	}
	return s
}

// applyEnvironment applies the environment's values and secrets, the source values and the
// cluster-init release (the build of the cluster-init unit, which Flux then keeps in sync).
func (f *flow) applyEnvironment(ctx context.Context) error {
	if f.pivotStarted {
		f.out.Log("the pivot has started: the environment stays as it was applied")
		return nil
	}
	return f.applyRelease(ctx, render.ContextBootstrap)
}

// applyRelease applies to the followed cluster what the CLI applies itself in a context: the
// environment, --values, the source values, and the build of the cluster-init unit (the release
// and its source, which Flux keeps in sync from then on).
func (f *flow) applyRelease(ctx context.Context, context string) error {
	res, err := render.Render(ctx, f.renderOptions(context))
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, o := range res.Objects {
		if o.Unit == "" && o.Origin != render.UmbrellaChart || o.Unit == "cluster-init" {
			objs = append(objs, o.Object)
		}
	}
	cs, err := apply.New(f.bootstrap).Apply(ctx, objs)
	if err != nil {
		return err
	}
	f.logChanges(cs)
	return nil
}

// build renders a kustomize component as a Flux Kustomization would.
func (f *flow) build(ctx context.Context, name, path string, substitute map[string]string) ([]*unstructured.Unstructured, error) {
	snap, err := os.MkdirTemp("", "cluster-init-source-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(snap)
	if err := source.Snapshot(f.opts.RepoRoot, snap); err != nil {
		return nil, err
	}
	ks := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": name, "namespace": environment.Namespace},
		"spec":     map[string]any{"path": path},
	}}
	if substitute != nil {
		vars := map[string]any{}
		for k, v := range substitute {
			vars[k] = v
		}
		_ = unstructured.SetNestedMap(ks.Object, map[string]any{"substitute": vars}, "spec", "postBuild")
	}
	return kustomize.Build(ctx, snap, ks)
}

// applyAndWait applies objs and waits for every object of wait with kstatus.
func (f *flow) applyAndWait(ctx context.Context, c *kube.Cluster, what string, objs, wait []*unstructured.Unstructured, timeout time.Duration) error {
	a := apply.New(c)
	cs, err := a.Apply(ctx, objs)
	if err != nil {
		return err
	}
	f.logChanges(cs)
	return a.Wait(ctx, wait, timeout, func(pending []apply.Pending) {
		var list []string
		for _, p := range pending {
			if p.Status != status.CurrentStatus {
				list = append(list, fmt.Sprintf("%s: %s", p.Object, p.Message))
			}
		}
		if len(list) > 0 {
			f.out.Waiting(what, list)
		}
	})
}

func (f *flow) logChanges(cs *ssa.ChangeSet) {
	counts := map[ssa.Action]int{}
	for _, e := range cs.Entries {
		counts[e.Action]++
	}
	f.out.Log("applied %d objects: %d created, %d configured, %d unchanged", len(cs.Entries),
		counts[ssa.CreatedAction], counts[ssa.ConfiguredAction], counts[ssa.UnchangedAction])
}
