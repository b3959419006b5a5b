// Package pivot makes the management cluster self-managed: it moves the cluster's Cluster API
// objects from the bootstrap cluster into the management cluster (clusterctl move) and hands them
// to the management cluster's Flux. It runs in the pivot Job of the bootstrap cluster. Every step
// records its completion on a ConfigMap, so that a Job restarted after any step resumes at the
// next one.
package pivot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/units"
)

// The steps, in order.
const (
	StepSaveKubeconfig = "save-kubeconfig" // keep the management kubeconfig: its Secret moves away
	StepWaitReady      = "wait-ready"      // providers of the management cluster and all machines ready
	StepSuspend        = "suspend"         // the bootstrap cluster stops reconciling the definitions
	StepMove           = "move"            // clusterctl move of the namespace
	StepAdopt          = "adopt"           // the management cluster's release takes the definitions over
	StepVerify         = "verify"          // Cluster ready from the management side, no machine replaced
)

// Steps lists the steps in order.
var Steps = []string{StepSaveKubeconfig, StepWaitReady, StepSuspend, StepMove, StepAdopt, StepVerify}

// State and kubeconfig copy, in the release namespace of the bootstrap cluster; the state
// ConfigMap of the management cluster, a valuesFrom layer of its cluster-init release.
const (
	StateConfigMap        = "cluster-init-pivot"
	KubeconfigCopy        = "cluster-init-pivot-kubeconfig"
	ManagementStateConfig = "cluster-init-state"
)

// SuspendedUnits are the bootstrap cluster's units that reconcile the moved definitions (or
// reach the cluster through its kubeconfig Secret, which moves): the pivot suspends them, with the
// HelmReleases that would re-create what moved.
var (
	SuspendedUnits        = []string{"cluster-init", "cluster", "cni", "cluster-ready", "management-cluster-init"}
	SuspendedHelmReleases = []string{"cluster-init", "cluster"}
)

// Options configure a pivot.
type Options struct {
	// Bootstrap is the cluster the Job runs in; BootstrapKubeconfig is a kubeconfig for it.
	Bootstrap           *kube.Cluster
	BootstrapKubeconfig []byte
	Namespace           string
	Cluster             string
	KubeconfigSecret    string
	// WorkDir holds the kubeconfig files clusterctl reads.
	WorkDir string
	// FailOnceAfter is a test hook: exit with an error right after each of these steps completes,
	// once each (comma separated; "" or "none": never).
	FailOnceAfter string
	// StepTimeout bounds each wait.
	StepTimeout time.Duration
	Log         func(format string, args ...any)
}

// state is what the ConfigMap records.
type state struct {
	Done []string `json:"done"`
	// ProviderIDs are the machines before the move, name -> provider ID.
	ProviderIDs map[string]string `json:"provider_ids,omitempty"`
	// FailedAfter are the steps the test hook stopped after.
	FailedAfter []string `json:"failed_after,omitempty"`
	// Attempts counts the runs of the pivot (a Job restarts it after a failure).
	Attempts int `json:"attempts"`
	// Completed is set once every step is done and the record is in the management cluster.
	Completed *metav1.Time `json:"completed,omitempty"`
}

type pivot struct {
	Options
	state      state
	management *kube.Cluster
}

// Run runs the steps not done yet.
func Run(ctx context.Context, opts Options) error {
	if opts.StepTimeout == 0 {
		opts.StepTimeout = 20 * time.Minute
	}
	p := &pivot{Options: opts}
	if err := p.load(ctx); err != nil {
		return err
	}
	p.state.Attempts++
	if err := p.save(ctx); err != nil {
		return err
	}
	failAfter := strings.Split(p.FailOnceAfter, ",")
	steps := map[string]func(context.Context) error{
		StepSaveKubeconfig: p.saveKubeconfig, StepWaitReady: p.waitReady, StepSuspend: p.suspend,
		StepMove: p.move, StepAdopt: p.adopt, StepVerify: p.verify,
	}
	for _, name := range Steps {
		if slices.Contains(p.state.Done, name) {
			p.Log("step %s: done before", name)
			continue
		}
		if name != StepSaveKubeconfig && p.management == nil {
			if err := p.connectManagement(ctx); err != nil {
				return err
			}
		}
		p.Log("step %s", name)
		start := time.Now()
		if err := steps[name](ctx); err != nil {
			return fmt.Errorf("pivot step %s: %w", name, err)
		}
		p.state.Done = append(p.state.Done, name)
		if err := p.save(ctx); err != nil {
			return err
		}
		p.Log("step %s: done in %s", name, time.Since(start).Round(time.Second))
		if slices.Contains(failAfter, name) && !slices.Contains(p.state.FailedAfter, name) {
			p.state.FailedAfter = append(p.state.FailedAfter, name)
			if err := p.save(ctx); err != nil {
				return err
			}
			return fmt.Errorf("test hook: stopping after step %s", name)
		}
	}
	// Leave the record of the pivot in the management cluster, where it stays, then mark it
	// complete in the bootstrap cluster: the CLI deletes the bootstrap cluster only after that.
	if p.management == nil {
		if err := p.connectManagement(ctx); err != nil {
			return err
		}
	}
	if p.state.Completed == nil {
		now := metav1.Now()
		p.state.Completed = &now
	}
	if err := p.record(ctx, p.management.Client); err != nil {
		return fmt.Errorf("record the pivot in the management cluster: %w", err)
	}
	if err := p.save(ctx); err != nil {
		return err
	}
	p.Log("pivot complete after %d attempts", p.state.Attempts)
	return nil
}

func (p *pivot) load(ctx context.Context) error {
	cm := &corev1.ConfigMap{}
	err := p.Bootstrap.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: StateConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the pivot state: %w", err)
	}
	return json.Unmarshal([]byte(cm.Data["state.json"]), &p.state)
}

func (p *pivot) save(ctx context.Context) error {
	return p.record(ctx, p.Bootstrap.Client)
}

// record writes the state into a cluster: the bootstrap cluster as the pivot goes, the management
// cluster once it is done (where it stays as the record of the pivot).
func (p *pivot) record(ctx context.Context, c client.Client) error {
	data, err := json.Marshal(p.state)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: StateConfigMap, Labels: map[string]string{"app.kubernetes.io/part-of": "cluster-init"}},
		Data:       map[string]string{"state.json": string(data)},
	}
	return serverSideApply(ctx, c, cm)
}

func serverSideApply(ctx context.Context, c client.Client, obj client.Object) error {
	//nolint:staticcheck // client.Apply with a typed object is the documented server-side apply
	return c.Patch(ctx, obj, client.Apply, client.FieldOwner("cluster-init-pivot"), client.ForceOwnership)
}

// saveKubeconfig copies the management kubeconfig out of the Secret that moves with the cluster.
func (p *pivot) saveKubeconfig(ctx context.Context) error {
	s := &corev1.Secret{}
	if err := p.Bootstrap.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.KubeconfigSecret}, s); err != nil {
		return fmt.Errorf("read Secret %s: %w", p.KubeconfigSecret, err)
	}
	cp := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: KubeconfigCopy, Labels: map[string]string{"app.kubernetes.io/part-of": "cluster-init"}},
		Data:       map[string][]byte{"value": s.Data["value"]},
	}
	return serverSideApply(ctx, p.Bootstrap.Client, cp)
}

func (p *pivot) connectManagement(ctx context.Context) error {
	s := &corev1.Secret{}
	if err := p.Bootstrap.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: KubeconfigCopy}, s); err != nil {
		return fmt.Errorf("read the saved management kubeconfig %s: %w", KubeconfigCopy, err)
	}
	m, err := kube.FromKubeconfig("management", s.Data["value"])
	if err != nil {
		return err
	}
	p.management = m
	return nil
}

// poll calls check until it says done, or fails at the step timeout with its last reason.
func (p *pivot) poll(ctx context.Context, what string, check func(context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, p.StepTimeout)
	defer cancel()
	last := ""
	for {
		done, reason, err := check(ctx)
		if err != nil && ctx.Err() == nil {
			reason = err.Error()
		}
		if done {
			return nil
		}
		if reason != last {
			p.Log("  waiting for %s: %s", what, reason)
			last = reason
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not done after %s: %s", what, p.StepTimeout, reason)
		case <-time.After(5 * time.Second):
		}
	}
}

// waitReady waits until every machine of the cluster runs (from the bootstrap side) and every unit
// of the management cluster's release is ready (its providers, so that it can take over).
func (p *pivot) waitReady(ctx context.Context) error {
	if err := p.poll(ctx, "the machines of "+p.Cluster, func(ctx context.Context) (bool, string, error) {
		ids, reason, err := machines(ctx, p.Bootstrap.Client, p.Namespace, p.Cluster)
		if err != nil || reason != "" {
			return false, reason, err
		}
		p.state.ProviderIDs = ids
		return true, "", nil
	}); err != nil {
		return err
	}
	return p.poll(ctx, "the units of the management cluster", func(ctx context.Context) (bool, string, error) {
		return unitsReady(ctx, p.management.Client, p.Namespace, nil)
	})
}

// machines returns the provider IDs of the cluster's machines, or why they are not all running.
func machines(ctx context.Context, c client.Client, namespace, cluster string) (map[string]string, string, error) {
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster}, cl); err != nil {
		return nil, "", fmt.Errorf("read Cluster %s: %w", cluster, err)
	}
	if c := apimeta.FindStatusCondition(cl.Status.Conditions, clusterv1.AvailableCondition); c == nil || c.Status != metav1.ConditionTrue {
		return nil, "Cluster " + cluster + " is not Available yet", nil
	}
	list := &clusterv1.MachineList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return nil, "", fmt.Errorf("list Machines: %w", err)
	}
	ids := map[string]string{}
	for _, m := range list.Items {
		if m.Status.Phase != string(clusterv1.MachinePhaseRunning) || m.Spec.ProviderID == "" || m.Status.NodeRef.Name == "" {
			return nil, fmt.Sprintf("Machine %s is %s", m.Name, m.Status.Phase), nil
		}
		ids[m.Name] = m.Spec.ProviderID
	}
	if len(ids) == 0 {
		return nil, "no Machine yet", nil
	}
	return ids, "", nil
}

// unitsReady tells whether every enabled unit of a cluster's release is ready (and includes the
// ones in want, when given).
func unitsReady(ctx context.Context, c client.Client, namespace string, want []string) (bool, string, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: units.ConfigMapName}, cm); err != nil {
		return false, "the cluster-init release has not rendered its units yet", client.IgnoreNotFound(err)
	}
	g, err := units.FromData(cm.Data)
	if err != nil {
		return false, "", err
	}
	for _, w := range want {
		if !slices.Contains(g.Order, w) {
			return false, "unit " + w + " is not enabled yet", nil
		}
	}
	for _, name := range g.Order {
		ks := &kustomizev1.Kustomization{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ks); err != nil {
			return false, "unit " + name + ": " + err.Error(), client.IgnoreNotFound(err)
		}
		ready := apimeta.FindStatusCondition(ks.Status.Conditions, "Ready")
		if ready == nil || ready.Status != metav1.ConditionTrue || ks.Status.ObservedGeneration != ks.Generation {
			msg := "not reconciled yet"
			if ready != nil {
				msg = ready.Reason + ": " + ready.Message
			}
			return false, "unit " + name + ": " + msg, nil
		}
	}
	return true, "", nil
}

// suspend stops the bootstrap cluster's reconcilers of the definitions.
func (p *pivot) suspend(ctx context.Context) error {
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":true}}`))
	for _, name := range SuspendedHelmReleases {
		if err := p.Bootstrap.Client.Patch(ctx, &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name}}, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("suspend HelmRelease %s: %w", name, err)
		}
	}
	for _, name := range SuspendedUnits {
		if err := p.Bootstrap.Client.Patch(ctx, &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name}}, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("suspend unit %s: %w", name, err)
		}
	}
	return nil
}

// move runs clusterctl move of the namespace, from the bootstrap cluster to the management cluster.
func (p *pivot) move(ctx context.Context) error {
	from := filepath.Join(p.WorkDir, "bootstrap.kubeconfig")
	to := filepath.Join(p.WorkDir, "management.kubeconfig")
	if err := os.WriteFile(from, p.BootstrapKubeconfig, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(to, p.management.Kubeconfig, 0o600); err != nil {
		return err
	}
	defer os.Remove(from)
	defer os.Remove(to)
	cfg, err := config.New(ctx, "", config.InjectReader(config.NewMemoryReader()))
	if err != nil {
		return err
	}
	c, err := clusterctl.New(ctx, "", clusterctl.InjectConfig(cfg))
	if err != nil {
		return fmt.Errorf("clusterctl client: %w", err)
	}
	return c.Move(ctx, clusterctl.MoveOptions{
		FromKubeconfig: clusterctl.Kubeconfig{Path: from},
		ToKubeconfig:   clusterctl.Kubeconfig{Path: to},
		Namespace:      p.Namespace,
	})
}

// adopt makes the management cluster's release render the cluster definitions: it records
// self_managed in the state ConfigMap its HelmRelease reads, and waits for the definitions' units.
func (p *pivot) adopt(ctx context.Context) error {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: ManagementStateConfig,
			Labels: map[string]string{"app.kubernetes.io/part-of": "cluster-init", "reconcile.fluxcd.io/watch": "Enabled"}},
		Data: map[string]string{"values.yaml": "self_managed: true\n"},
	}
	if err := serverSideApply(ctx, p.management.Client, cm); err != nil {
		return fmt.Errorf("record self_managed in the management cluster: %w", err)
	}
	return p.poll(ctx, "the management cluster to reconcile its own definitions", func(ctx context.Context) (bool, string, error) {
		return unitsReady(ctx, p.management.Client, p.Namespace, []string{"cluster", "cni", "cluster-ready"})
	})
}

// verify checks from the management side that the cluster is available with the same machines.
func (p *pivot) verify(ctx context.Context) error {
	return p.poll(ctx, "the cluster seen from the management cluster", func(ctx context.Context) (bool, string, error) {
		ids, reason, err := machines(ctx, p.management.Client, p.Namespace, p.Cluster)
		if err != nil || reason != "" {
			return false, reason, err
		}
		if replaced := Replaced(p.state.ProviderIDs, ids); len(replaced) > 0 {
			return false, "", fmt.Errorf("machines replaced during the pivot: %v", replaced)
		}
		// Nothing of the cluster is left in the bootstrap cluster.
		left := &clusterv1.ClusterList{}
		if err := p.Bootstrap.Client.List(ctx, left, client.InNamespace(p.Namespace)); err != nil {
			return false, "", err
		}
		if len(left.Items) > 0 {
			return false, "", fmt.Errorf("Cluster %s is still in the bootstrap cluster after the move", p.Cluster)
		}
		return true, "", nil
	})
}

// Replaced lists the machines of before whose provider ID is not the same after.
func Replaced(before, after map[string]string) []string {
	var out []string
	for name, id := range before {
		if after[name] != id {
			out = append(out, fmt.Sprintf("%s (%s -> %q)", name, id, after[name]))
		}
	}
	sort.Strings(out)
	return out
}
