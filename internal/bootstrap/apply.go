package bootstrap

import (
	"context"
	"fmt"
	"os"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/values"
)

// Apply is day 2: it re-applies the environment to its self-managed management cluster (values,
// secrets, source) and follows the units until the change is rolled out, machines included.
func Apply(ctx context.Context, opts Options) (*Result, error) {
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	// The management cluster's release owns its definitions since the pivot.
	opts.Overrides = append(opts.Overrides, values.FromMap("(state after the pivot)", map[string]any{"self_managed": true}))
	f := &flow{opts: opts, out: opts.Out, start: time.Now(), result: &Result{}}
	defer opts.Out.Close()
	phases := []phase{
		{"validate", f.validateManagement},
		{"management cluster", f.connectManagement},
		{"source", f.publishSource},
		{"environment", f.applyToManagement},
		{"units", f.followUnits},
		{"machines", f.settleMachines},
	}
	return f.run(ctx, phases)
}

func (f *flow) validateManagement(ctx context.Context) error {
	res, err := render.Render(ctx, f.renderOptions(render.ContextManagement))
	if err != nil {
		return fmt.Errorf("environment %s is invalid, nothing was changed:\n%w", f.opts.Env.Name, err)
	}
	f.values = res.Values
	f.out.Log("management context: %d units, %d objects", len(res.Graph.Order), len(res.Objects))
	return nil
}

// connectManagement connects to the management cluster the bootstrap wrote the kubeconfig of
// (or the one given with --kubeconfig).
func (f *flow) connectManagement(ctx context.Context) error {
	path := f.opts.Kubeconfig
	if path == "" {
		path = ManagementKubeconfig(f.opts.StateDir, f.opts.Env.Name)
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("no management cluster for environment %s (%s): bootstrap it first, or give --kubeconfig", f.opts.Env.Name, path)
		}
	}
	c, err := kube.FromFile("management", path)
	if err != nil {
		return err
	}
	f.bootstrap = c // the cluster whose units are followed
	f.out.Log("management cluster: %s (%s)", c.Config.Host, path)
	return nil
}

// applyToManagement applies the environment and the source values, then asks the cluster-init
// release to reconcile now rather than at its next interval.
func (f *flow) applyToManagement(ctx context.Context) error {
	if err := f.applyRelease(ctx, render.ContextManagement); err != nil {
		return err
	}
	return f.reconcileRelease(ctx)
}

// reconcileRelease requests a reconciliation of the cluster-init HelmRelease and waits until it
// has handled it and is ready: from then on the units carry the new values.
func (f *flow) reconcileRelease(ctx context.Context) error {
	c := f.bootstrap.Client
	key := client.ObjectKey{Namespace: environment.Namespace, Name: render.ReleaseName}
	at := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, at)
	if err := c.Patch(ctx, &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
		client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		return fmt.Errorf("request a reconciliation of HelmRelease %s: %w", key.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for {
		hr := &helmv2.HelmRelease{}
		if err := c.Get(ctx, key, hr); err == nil && hr.Status.LastHandledReconcileAt == at {
			ready := apimeta.FindStatusCondition(hr.Status.Conditions, meta.ReadyCondition)
			if ready != nil && ready.Status == metav1.ConditionTrue {
				f.out.Log("release %s reconciled: %s", key.Name, ready.Message)
				return nil
			}
			if ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason != meta.ProgressingReason {
				return fmt.Errorf("release %s: %s: %s", key.Name, ready.Reason, ready.Message)
			}
		}
		f.out.Waiting("the cluster-init release to take the new values", nil)
		select {
		case <-ctx.Done():
			return fmt.Errorf("release %s did not reconcile within 10m", key.Name)
		case <-time.After(pollInterval):
		}
	}
}

// settleMachines waits until the cluster has the machines its definitions ask for, all running.
func (f *flow) settleMachines(ctx context.Context) error {
	name := nestedString(f.values, "cluster", "name")
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	for {
		want, got, pending, err := machineCounts(ctx, f.bootstrap.Client, name)
		if err == nil && want == got && len(pending) == 0 {
			f.out.Log("cluster %s has its %d machines running", name, got)
			return nil
		}
		if err != nil {
			pending = append(pending, err.Error())
		}
		f.out.Waiting(fmt.Sprintf("%d machines of %s (%d now)", want, name, got), pending)
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s: %d machines wanted, %d there: %v", name, want, got, pending)
		case <-time.After(pollInterval):
		}
	}
}

// machineCounts returns the machines the control plane and MachineDeployments ask for, the
// machines there, and the ones not running.
func machineCounts(ctx context.Context, c client.Client, cluster string) (want, got int, pending []string, err error) {
	sel := client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}
	ns := client.InNamespace(environment.Namespace)
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: environment.Namespace, Name: cluster}, cl); err != nil {
		return 0, 0, nil, err
	}
	if ref := cl.Spec.ControlPlaneRef; ref.Name != "" {
		cp := &unstructured.Unstructured{}
		cp.SetAPIVersion(ref.APIGroup + "/v1beta2")
		cp.SetKind(ref.Kind)
		if ref.Kind == "RKE2ControlPlane" {
			cp.SetAPIVersion(ref.APIGroup + "/v1beta1")
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: environment.Namespace, Name: ref.Name}, cp); err != nil {
			return 0, 0, nil, err
		}
		n, _, _ := unstructured.NestedInt64(cp.Object, "spec", "replicas")
		want += int(n)
	}
	mds := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, mds, ns, sel); err != nil {
		return 0, 0, nil, err
	}
	for _, md := range mds.Items {
		if md.Spec.Replicas != nil {
			want += int(*md.Spec.Replicas)
		}
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, ns, sel); err != nil {
		return 0, 0, nil, err
	}
	for _, m := range machines.Items {
		got++
		if m.Status.Phase != string(clusterv1.MachinePhaseRunning) || m.Status.NodeRef.Name == "" {
			pending = append(pending, fmt.Sprintf("Machine %s: %s", m.Name, m.Status.Phase))
		}
	}
	return want, got, pending, nil
}
