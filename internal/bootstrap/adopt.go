package bootstrap

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/adopt"
	"cluster-init.dev/cluster-init/internal/atomicfile"
	"cluster-init.dev/cluster-init/internal/envmarker"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/validate"
)

// Adopt makes an existing cluster the environment's management cluster (bootstrap ENV
// --kubeconfig FILE --adopt): Flux is installed into it, and the cluster-init release runs there
// in the management context with no cluster definitions of its own, recorded as adopted in the
// cluster's state; the providers and the workload clusters then come from the environment's
// source, as in a pivoted management cluster. Nothing creates, replaces or deletes the cluster
// itself. Like Run, every phase is safe to run again.
func Adopt(ctx context.Context, opts AdoptOptions) (*Result, error) {
	if opts.Kubeconfig == "" {
		return &Result{}, errors.New("--adopt: name the cluster to adopt with --kubeconfig FILE (and --kube-context)")
	}
	s, err := newSessionBesideStandalone(opts.Common, opts.Source)
	if err != nil {
		return &Result{}, err
	}
	defer s.close()

	f := &flow{s: s}
	return s.run(ctx, opts.Until, []phase{
		{"validate", f.validate(validateAdopted)},
		{"cluster", func(ctx context.Context) (err error) {
			f.bc, err = connectAdopted(ctx, s, f.plan, opts)
			return err
		}},
		{"flux", f.flux},
		{"source", f.source},
		{"environment", func(ctx context.Context) error {
			if err := applyRelease(ctx, s, f.bc.cluster, f.plan, f.src); err != nil {
				return err
			}
			// The state goes in once its namespace exists (applied with the release): the release,
			// which reads it last, then renders as adopted from its first upgrade on.
			if err := managementstate.Write(ctx, f.bc.cluster.Client, names.FieldManager, managementstate.State{Adopted: true}); err != nil {
				return err
			}
			return reconcileRelease(ctx, s, f.bc.cluster)
		}},
		{"units", f.units},
		{"finish", func(ctx context.Context) error {
			s.result.Management = s.opts.StateDir.Environment(s.opts.Env.Name).ManagementKubeconfig()
			s.out.Log("%s is the management cluster of %s: its Flux reconciles its own units; Cluster API does not manage it", f.bc.cluster.Config.Host, s.opts.Env.Name)
			s.out.Log("kubeconfig of the management cluster (mode 0600): %s", s.result.Management)
			return nil
		}},
	})
}

// validateAdopted checks the environment as the adopted cluster renders it (and its workload
// clusters, with a git source), before anything is changed.
func validateAdopted(ctx context.Context, s *session, src *publishedSource) (*render.Result, error) {
	reports, err := validate.EnvironmentAs(ctx, s.renderer, s.opts.RepoRoot, s.renderOptions("", src.values), validate.AdoptedTargets(), nil)
	if err != nil {
		return nil, fmt.Errorf("environment %s is invalid, nothing was changed:\n%w", s.opts.Env.Name, err)
	}
	var plan *render.Result
	for _, r := range reports {
		s.out.Log("%s: %d units, %d objects valid", r.Target, r.Units, r.Objects)
		if r.Context == render.ContextManagement && plan == nil {
			plan = r.Result
		}
	}
	if plan == nil {
		return nil, fmt.Errorf("environment %s has no management context: is it a workload cluster's?", s.opts.Env.Name)
	}
	return plan, nil
}

// connectAdopted connects to the cluster to adopt and checks that it may be: not another
// environment's, not a cluster-init management cluster already (self-managed, or adopted by
// another environment), and running no Flux, cert-manager or Cluster API that cluster-init did
// not install (unless told to take them over).
func connectAdopted(ctx context.Context, s *session, plan *render.Result, opts AdoptOptions) (*bootstrapCluster, error) {
	env := s.opts.Env.Name
	c, err := kube.Load("management", opts.Kubeconfig, opts.Context)
	if err != nil {
		return nil, err
	}
	// One management cluster per environment: not a second one next to a bootstrapped or
	// adopted one, whose workload clusters it would run again from git.
	kubeconfig := s.opts.StateDir.Environment(env).ManagementKubeconfig()
	if saved, err := kube.FromFile("management", kubeconfig); err == nil && saved.Config.Host != c.Config.Host {
		return nil, fmt.Errorf("environment %s has a management cluster already (%s, kubeconfig %s): run `bootstrap cleanup %s` first", env, saved.Config.Host, kubeconfig, env)
	}
	kind := kindcluster.New(s.opts.StateDir.KindClusters(), func(string) {})
	if exists, err := kind.Exists(plan.Settings.BootstrapCluster.Name); err != nil {
		return nil, err
	} else if exists {
		if k, err := kind.Connect(plan.Settings.BootstrapCluster.Name); err == nil && envmarker.Check(ctx, k.Client, env) == nil {
			return nil, fmt.Errorf("environment %s is being bootstrapped from kind cluster %s: finish it (`bootstrap %s`) or remove it (`bootstrap cleanup %s`) first", env, plan.Settings.BootstrapCluster.Name, env, env)
		}
	}
	if err := envmarker.Check(ctx, c.Client, env); err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", opts.Kubeconfig, err)
	}
	st, _, err := managementstate.Read(ctx, c.Client)
	if err != nil {
		return nil, err
	}
	if st.SelfManaged {
		return nil, fmt.Errorf("--kubeconfig %s is a self-managed cluster-init management cluster: use `bootstrap apply %s --kubeconfig %s` to change it", opts.Kubeconfig, env, opts.Kubeconfig)
	}
	// Clusters defined here that are not the tenants' workload clusters: the environment's own
	// cluster (bootstrap --kubeconfig without --adopt), which the management release would delete,
	// or someone else's, which cleanup would delete; maybe the cluster's own definition.
	if err := refuseDefinedClusters(ctx, c, opts.Kubeconfig, env); err != nil {
		return nil, err
	}
	foreign, err := adopt.Foreign(ctx, c.Client)
	if err != nil {
		return nil, err
	}
	if len(foreign) > 0 {
		if !opts.TakeOver {
			return nil, fmt.Errorf("--kubeconfig %s: %w", opts.Kubeconfig, adopt.Refusal(foreign))
		}
		for _, f := range foreign {
			s.out.Log("taking over %s (--take-over)", f)
		}
	}
	if err := envmarker.Write(ctx, c.Client, env); err != nil {
		return nil, err
	}
	// Kept from now on, so that status and cleanup find the cluster even if the adoption stops
	// half-way; the record says cleanup must leave the cluster itself.
	if err := atomicfile.Write(kubeconfig, c.Kubeconfig, 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(s.opts.StateDir.Environment(env).AdoptedRecord(), []byte(c.Config.Host+"\n"), 0o600); err != nil {
		return nil, err
	}
	s.out.Log("adopting %s (%s) as the management cluster of %s: nothing will create, replace or delete it", c.Config.Host, opts.Kubeconfig, env)
	return &bootstrapCluster{cluster: c}, nil
}

// refuseDefinedClusters refuses a cluster that defines Cluster API clusters other than the
// workload clusters of cluster-init's tenants.
func refuseDefinedClusters(ctx context.Context, c *kube.Cluster, kubeconfig, env string) error {
	defined := &clusterv1.ClusterList{}
	if err := c.Client.List(ctx, defined); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("look for the clusters defined in the cluster: %w", err)
	}
	for _, cl := range defined.Items {
		ns := &corev1.Namespace{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: cl.Namespace}, ns); err != nil {
			return fmt.Errorf("read namespace %s: %w", cl.Namespace, err)
		}
		if _, tenant := ns.Labels[names.TenantLabel]; tenant {
			continue
		}
		if cl.Namespace == names.Namespace {
			return fmt.Errorf("--kubeconfig %s defines Cluster %s/%s (bootstrap %s --kubeconfig without --adopt): adopting it would delete that cluster; run `bootstrap cleanup %s` first, or keep using it that way", kubeconfig, cl.Namespace, cl.Name, env, env)
		}
		return fmt.Errorf("--kubeconfig %s defines Cluster %s/%s, which cluster-init did not make: cleanup would delete it (it may be the cluster's own definition); manage it elsewhere first", kubeconfig, cl.Namespace, cl.Name)
	}
	return nil
}
