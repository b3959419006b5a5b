package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/pivot"
)

// ManagementKubeconfig is where the kubeconfig of an environment's management cluster is written
// once it is self-managed.
func ManagementKubeconfig(stateDir, env string) string {
	return filepath.Join(stateDir, "environments", env, "management.kubeconfig")
}

// finish checks the pivot from the management side, writes the management kubeconfig and deletes
// the bootstrap cluster, which is only ever deleted after a verified pivot.
func (f *flow) finish(ctx context.Context) error {
	if f.kind == nil {
		f.out.Log("bootstrapped from an existing cluster: no pivot, the cluster keeps managing %s", nestedString(f.values, "cluster", "name"))
		return nil
	}
	if err := f.pivotComplete(ctx); err != nil {
		return fmt.Errorf("the bootstrap cluster is kept: %w", err)
	}
	m, err := f.savedManagementCluster(ctx)
	if err != nil {
		return fmt.Errorf("the bootstrap cluster is kept: %w", err)
	}
	name := nestedString(f.values, "cluster", "name")
	machines, err := verifyManagement(ctx, m, name)
	if err != nil {
		return fmt.Errorf("the bootstrap cluster is kept: %w", err)
	}
	path := ManagementKubeconfig(f.opts.StateDir, f.opts.Env.Name)
	if err := writeSecretFile(path, m.Kubeconfig); err != nil {
		return err
	}
	f.result.Management = path
	f.out.Log("management cluster %s is self-managed: %d machines, its Flux reconciles its own units", name, machines)
	f.out.Log("kubeconfig of the management cluster (mode 0600): %s", path)
	if f.opts.KeepBootstrap {
		f.out.Log("keeping the bootstrap cluster (--keep-bootstrap): %s", f.result.Bootstrap)
		return nil
	}
	kindName := nestedString(f.values, "bootstrap_cluster", "name")
	f.out.Log("deleting the bootstrap cluster %s", kindName)
	return f.kind.Delete(kindName)
}

// pivotState is what the pivot records in the bootstrap cluster.
type pivotState struct {
	Done      []string `json:"done"`
	Completed string   `json:"completed"`
}

// pivotSteps returns the steps the pivot recorded as done in the bootstrap cluster, nil when it
// has not started.
func (f *flow) pivotSteps(ctx context.Context) ([]string, error) {
	st, err := f.pivotState(ctx)
	return st.Done, err
}

func (f *flow) pivotState(ctx context.Context) (pivotState, error) {
	cm := &corev1.ConfigMap{}
	err := f.bootstrap.Client.Get(ctx, client.ObjectKey{Namespace: environment.Namespace, Name: pivot.StateConfigMap}, cm)
	var st pivotState
	if apierrors.IsNotFound(err) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read the pivot's progress: %w", err)
	}
	if err := json.Unmarshal([]byte(cm.Data["state.json"]), &st); err != nil {
		return st, fmt.Errorf("pivot state: %w", err)
	}
	return st, nil
}

// pivotComplete fails unless the pivot did every step and recorded itself complete.
func (f *flow) pivotComplete(ctx context.Context) error {
	st, err := f.pivotState(ctx)
	if err != nil {
		return err
	}
	for _, s := range pivot.Steps {
		if !slices.Contains(st.Done, s) {
			return fmt.Errorf("the pivot did not finish: step %s not done (done: %v)", s, st.Done)
		}
	}
	if st.Completed == "" {
		return fmt.Errorf("the pivot did every step but has not recorded itself complete yet")
	}
	return nil
}

// savedManagementCluster connects with the kubeconfig the pivot kept (the Cluster API one moved).
func (f *flow) savedManagementCluster(ctx context.Context) (*kube.Cluster, error) {
	s := &corev1.Secret{}
	if err := f.bootstrap.Client.Get(ctx, client.ObjectKey{Namespace: environment.Namespace, Name: pivot.KubeconfigCopy}, s); err != nil {
		return nil, fmt.Errorf("the management kubeconfig kept by the pivot: %w", err)
	}
	return kube.FromKubeconfig("management", s.Data["value"])
}

// verifyManagement checks, from the management cluster, that it holds its own Cluster, Available,
// and that it reconciles its own units. It returns the number of machines.
func verifyManagement(ctx context.Context, m *kube.Cluster, name string) (int, error) {
	cl := &clusterv1.Cluster{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: environment.Namespace, Name: name}, cl); err != nil {
		return 0, fmt.Errorf("the management cluster does not hold its Cluster %s: %w", name, err)
	}
	if c := apimeta.FindStatusCondition(cl.Status.Conditions, clusterv1.AvailableCondition); c == nil || c.Status != metav1.ConditionTrue {
		return 0, fmt.Errorf("Cluster %s is not Available from the management side", name)
	}
	list := &clusterv1.MachineList{}
	if err := m.Client.List(ctx, list, client.InNamespace(environment.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// writeSecretFile writes credentials readable by their owner only.
func writeSecretFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// alreadyBootstrapped refuses to start again an environment whose management cluster is
// self-managed: a new kind cluster would create a second management cluster.
func alreadyBootstrapped(ctx context.Context, stateDir, env string) error {
	path := ManagementKubeconfig(stateDir, env)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	m, err := kube.FromKubeconfig("management", data)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cm := &corev1.ConfigMap{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: environment.Namespace, Name: pivot.ManagementStateConfig}, cm); err != nil {
		return fmt.Errorf("environment %s was bootstrapped (kubeconfig %s) but its management cluster does not answer (%v): if it is gone, remove %s and run again", env, path, err, path)
	}
	return fmt.Errorf("environment %s is already bootstrapped and self-managed (kubeconfig %s): use `bootstrap apply %s` to change it", env, path, env)
}
