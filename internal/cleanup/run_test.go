package cleanup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/envmarker"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/records"
	"cluster-init.dev/cluster-init/internal/standalone"
	"cluster-init.dev/cluster-init/internal/statedir"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// Run's decisions, against real API servers: envtest clusters play the kind cluster and the
// management cluster. What needs Docker cannot run here, and is stood in for: kindClusters for
// kind (its clusters are those API servers), docker for the host's containers; both record what
// cleanup removes.

const (
	env         = "dev"
	kindName    = "dev-bootstrap"
	clusterName = "mgmt"
)

// An environment with a standalone cluster is left to `bootstrap delete`, nothing of it removed;
// an interrupted creation, whose kind cluster still manages the cluster, goes with its state, the
// state only once everything else is gone.
func TestAStandaloneClusterIsOnlyCleanedUpWhileBeingCreated(t *testing.T) {
	ctx := testContext(t)
	tg := newTarget(t, true)
	rec := records.Of(tg.State, tg.Environment)
	record(t, rec, records.Owned{"mgmt-control-plane-x9fsm": true})
	kind := &kindClusters{clusters: map[string]*kube.Cluster{kindName: bootstrapCluster(t, env)}}
	host := &docker{containers: []Container{{"1", "mgmt-control-plane-x9fsm", clusterName}}}
	sd, err := standalone.DirOf(tg.State.Standalone(), env)
	if err != nil {
		t.Fatal(err)
	}
	st := &standalone.State{Environment: env, Cluster: clusterName, Namespace: names.Namespace, Recipient: "age1test",
		BootstrapCluster: standalone.BootstrapCluster{Name: kindName, NodeImage: "kindest/node:v1.33.1"},
		ManagementUnits:  []standalone.ManagementUnit{{Name: "capi"}}}
	if err := sd.Save(st); err != nil {
		t.Fatal(err)
	}

	err = Run(ctx, kind, host, tg, logf(t))
	if err == nil || !strings.Contains(err.Error(), "`bootstrap delete "+env+"`") {
		t.Fatalf("a created standalone cluster: %v", err)
	}
	if len(kind.deleted) != 0 || len(host.removed) != 0 || !stateExists(t, sd) || len(recordsLeft(rec)) != 1 {
		t.Errorf("a refused cleanup removed something: kind clusters %v, containers %v, state kept %t, records %v", kind.deleted, host.removed, stateExists(t, sd), recordsLeft(rec))
	}

	st.Pending = &standalone.Operation{Command: standalone.CommandCreate}
	if err := sd.Save(st); err != nil {
		t.Fatal(err)
	}
	host.fail = errors.New("Cannot connect to the Docker daemon")
	if err := Run(ctx, kind, host, tg, logf(t)); err == nil {
		t.Fatal("the containers could not be removed, and the cleanup succeeded")
	}
	if !stateExists(t, sd) || len(recordsLeft(rec)) != 1 {
		t.Errorf("a failed cleanup of an interrupted creation kept: state %t, records %v", stateExists(t, sd), recordsLeft(rec))
	}
	if err := Run(ctx, kind, host, tg, logf(t)); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(kind.deleted) != "["+kindName+"]" || fmt.Sprint(host.removed) != "[mgmt-control-plane-x9fsm]" || stateExists(t, sd) || len(recordsLeft(rec)) != 0 {
		t.Errorf("an interrupted creation: kind clusters deleted %v, containers removed %v, state kept %t, records %v", kind.deleted, host.removed, stateExists(t, sd), recordsLeft(rec))
	}
}

// An adopted management cluster that does not answer may still run: nothing is removed, not even
// the kind cluster of the environment, and the records stay for when it answers again.
func TestAnAdoptedClusterThatDoesNotAnswerIsLeft(t *testing.T) {
	ctx := testContext(t)
	tg := newTarget(t, true)
	tg.flux = func(context.Context) ([]*unstructured.Unstructured, error) {
		t.Error("cleanup went on to remove Flux from a cluster that does not answer")
		return nil, nil
	}
	rec := records.Of(tg.State, tg.Environment)
	// Nothing listens on port 1 of this host: the adopted cluster is out of reach.
	writeFile(t, rec.Kubeconfig, kubeconfigOf(t, "https://127.0.0.1:1"))
	writeFile(t, rec.Adopted, []byte("https://127.0.0.1:1\n"))
	record(t, rec, records.Owned{"mgmt-control-plane-x9fsm": true})
	kind := &kindClusters{clusters: map[string]*kube.Cluster{kindName: bootstrapCluster(t, env)}}
	host := &docker{containers: []Container{{"1", "mgmt-control-plane-x9fsm", clusterName}}}

	err := Run(ctx, kind, host, tg, logf(t))
	if err == nil || !strings.Contains(err.Error(), "does not answer, nothing was removed") {
		t.Fatalf("an adopted cluster that does not answer: %v", err)
	}
	if len(kind.deleted) != 0 || len(host.removed) != 0 || len(recordsLeft(rec)) != 3 {
		t.Errorf("removed: kind clusters %v, containers %v; records left %v", kind.deleted, host.removed, recordsLeft(rec))
	}
}

// An adopted management cluster, as recorded here or as the cluster itself says, keeps running:
// only what cluster-init installed into it goes, and the records of the environment.
func TestAnAdoptedClusterKeepsRunning(t *testing.T) {
	management := testenv.Start(t, "management")
	namespaceController(t, management)
	// What cluster-init did not install.
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "platform-settings"}}
	create(t, management.Client, theirs)
	for _, tc := range []struct {
		name            string
		recorded, state bool
	}{
		{"recorded here, the cluster's state lost", true, false},
		{"as the cluster says, the record lost", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			c := management.Client
			// What bootstrap --adopt installed: Flux (one of its Deployments stands in for all its
			// objects) and the marker.
			createNamespace(t, management, "flux-system")
			// As left by the other case, when cleanup did not remove it.
			if err := c.Create(ctx, deployment("flux-system", "source-controller")); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			if err := envmarker.Write(ctx, management.Client, env); err != nil {
				t.Fatal(err)
			}
			if tc.state {
				createNamespace(t, management, names.Namespace)
				if err := managementstate.Write(ctx, c, names.FieldManager, managementstate.State{Adopted: true}); err != nil {
					t.Fatal(err)
				}
			}
			tg := newTarget(t, true)
			flux := 0
			tg.flux = func(context.Context) ([]*unstructured.Unstructured, error) {
				flux++
				d := &unstructured.Unstructured{}
				d.SetAPIVersion("apps/v1")
				d.SetKind("Deployment")
				d.SetNamespace("flux-system")
				d.SetName("source-controller")
				return []*unstructured.Unstructured{d}, nil
			}
			rec := records.Of(tg.State, tg.Environment)
			writeFile(t, rec.Kubeconfig, management.Kubeconfig)
			if tc.recorded {
				writeFile(t, rec.Adopted, []byte(management.Config.Host+"\n"))
			}
			// The adopted cluster's own node, a container of this host.
			record(t, rec, records.Owned{"mgmt-control-plane-x9fsm": true})
			host := &docker{containers: []Container{{"1", "mgmt-control-plane-x9fsm", clusterName}}}
			kind := &kindClusters{}

			if err := Run(ctx, kind, host, tg, logf(t)); err != nil {
				t.Fatal(err)
			}
			if flux != 1 || !gone(t, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "source-controller"}}) ||
				!gone(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: envmarker.Namespace, Name: envmarker.Name}}) {
				t.Errorf("what cluster-init installed is left (Flux objects built %d times)", flux)
			}
			if gone(t, c, theirs) {
				t.Error("what cluster-init did not install was removed")
			}
			if len(host.removed) != 0 || len(kind.deleted) != 0 {
				t.Errorf("the adopted cluster was deleted: containers %v, kind clusters %v", host.removed, kind.deleted)
			}
			if left := recordsLeft(rec); len(left) != 0 {
				t.Errorf("records left: %v", left)
			}
		})
	}
}

// A kind cluster of the same name that bootstraps another environment is not this one's to
// delete.
func TestAKindClusterOfAnotherEnvironmentIsLeft(t *testing.T) {
	ctx := testContext(t)
	tg := newTarget(t, true)
	rec := records.Of(tg.State, tg.Environment)
	record(t, rec, records.Owned{"mgmt-control-plane-x9fsm": true})
	kind := &kindClusters{clusters: map[string]*kube.Cluster{kindName: bootstrapCluster(t, "staging")}}
	host := &docker{containers: []Container{{"1", "mgmt-control-plane-x9fsm", clusterName}}}

	err := Run(ctx, kind, host, tg, logf(t))
	if err == nil || !strings.Contains(err.Error(), `"staging"`) || !strings.Contains(err.Error(), "not deleting it") {
		t.Fatalf("a kind cluster of another environment: %v", err)
	}
	if len(kind.deleted) != 0 || len(host.removed) != 0 || len(recordsLeft(rec)) != 1 {
		t.Errorf("removed: kind clusters %v, containers %v; records left %v", kind.deleted, host.removed, recordsLeft(rec))
	}

	// A kind cluster of the same name that cluster-init did not create (no marker, no record of
	// its creation): a user's own, left alone.
	unmarked := testenv.Start(t, "unmarked")
	kind = &kindClusters{clusters: map[string]*kube.Cluster{kindName: unmarked}, records: tg.State.KindClusters()}
	// A context of its own: starting a second API server can take minutes on a busy machine.
	err = Run(testContext(t), kind, host, tg, logf(t))
	if err == nil || !strings.Contains(err.Error(), "was not created by cluster-init") || len(kind.deleted) != 0 || len(host.removed) != 0 {
		t.Errorf("a kind cluster cluster-init did not create: %v; deleted %v, removed %v", err, kind.deleted, host.removed)
	}
}

// Machines elsewhere than this host, a Cluster that Cluster API cannot delete: the kind cluster
// is the only record of what the provider created, and is kept while there is any; once the
// provider recorded nothing, it goes.
func TestWhatTheProviderCreatedKeepsTheKindCluster(t *testing.T) {
	ctx := testContext(t)
	bootstrap := bootstrapCluster(t, env)
	c := bootstrap.Client
	// Cluster API's finalizer, which no controller removes here.
	create(t, c, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: clusterName, Finalizers: []string{clusterv1.ClusterFinalizer}},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "OpenStackCluster", Name: clusterName}}})
	osc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OpenStackCluster",
		"metadata": map[string]any{"namespace": names.Namespace, "name": clusterName},
		"spec":     map[string]any{"identityRef": map[string]any{"cloudName": "openstack", "name": "mgmt-cloud-config"}},
	}}
	create(t, c, osc)
	// What CAPO records once it created a network and an instance.
	osc.Object["status"] = map[string]any{"ready": false, "network": map[string]any{"id": "2f1c", "name": "k8s-clusterapi-cluster-mgmt"}}
	if err := c.Status().Update(ctx, osc); err != nil {
		t.Fatal(err)
	}
	machine := newMachine(clusterName, "mgmt-control-plane-a", "openstack:///9b0e", "OpenStackMachine")
	create(t, c, machine)
	tg := newTarget(t, false)
	kind := &kindClusters{clusters: map[string]*kube.Cluster{kindName: bootstrap}}
	host := &docker{containers: []Container{{"1", "mgmt-lb", clusterName}}}

	err := Run(ctx, kind, host, tg, logf(t))
	if err == nil {
		t.Fatal("the kind cluster went with what the provider created")
	}
	for _, want := range []string{"OpenStackCluster mgmt: status.network", "Machine mgmt-control-plane-a: openstack:///9b0e", "kind cluster " + kindName + " is kept"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if len(kind.deleted) != 0 || len(host.removed) != 0 {
		t.Errorf("removed: kind clusters %v, containers %v", kind.deleted, host.removed)
	}

	// The provider never reached its cloud.
	osc.Object["status"] = map[string]any{"ready": false}
	if err := c.Status().Update(ctx, osc); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, machine); err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, kind, host, tg, logf(t)); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(kind.deleted) != "["+kindName+"]" || len(host.removed) != 0 {
		t.Errorf("nothing created: kind clusters deleted %v, containers removed %v", kind.deleted, host.removed)
	}
}

// CAPD machines whose Cluster API cannot delete them are removed directly: only the containers
// named after a machine or load balancer of this environment's clusters, as its kind cluster
// defines them or as recorded, never another cluster's of the same name. The records go only once
// the containers have: a cleanup run again still knows them without the kind cluster.
func TestOnlyTheEnvironmentsContainersAreRemovedDirectly(t *testing.T) {
	ctx := testContext(t)
	bootstrap := bootstrapCluster(t, env)
	create(t, bootstrap.Client, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: clusterName},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: clusterName}}})
	create(t, bootstrap.Client, newMachine(clusterName, "mgmt-control-plane-x9fsm", "docker:////mgmt-control-plane-x9fsm", "DockerMachine"))
	create(t, bootstrap.Client, newMachine(clusterName, "md-0-abc", "", "DockerMachine")) // not provisioned yet
	tg := newTarget(t, true)
	rec := records.Of(tg.State, tg.Environment)
	record(t, rec, records.Owned{"mgmt-md-0-old": true}) // a machine replaced since the bootstrap
	kind := &kindClusters{clusters: map[string]*kube.Cluster{kindName: bootstrap}}
	host := &docker{containers: []Container{
		{"1", "mgmt-control-plane-x9fsm", clusterName},
		{"2", "mgmt-md-0-abc", clusterName},
		{"3", "mgmt-lb", clusterName},
		{"4", "mgmt-md-0-old", clusterName},
		{"5", "mgmt-control-plane", clusterName},       // a node of a kind cluster called mgmt
		{"6", "mgmt-control-plane-q7w2e", clusterName}, // another environment's CAPD cluster called mgmt
		{"7", "prod-control-plane-abc", "prod"},        // another environment's cluster
		{"8", kindName + "-control-plane", kindName},   // the kind cluster's node: kind deletes it
	}}
	host.fail = errors.New("Cannot connect to the Docker daemon")

	if err := Run(ctx, kind, host, tg, logf(t)); err == nil {
		t.Fatal("the containers could not be removed, and the cleanup succeeded")
	}
	if fmt.Sprint(kind.deleted) != "["+kindName+"]" || fmt.Sprint(recordsLeft(rec)) != "[containers.json]" {
		t.Fatalf("kind clusters deleted %v, records left %v", kind.deleted, recordsLeft(rec))
	}

	if err := Run(ctx, kind, host, tg, logf(t)); err != nil {
		t.Fatal(err)
	}
	slices.Sort(host.removed)
	if got := fmt.Sprint(host.removed); got != "[mgmt-control-plane-x9fsm mgmt-lb mgmt-md-0-abc mgmt-md-0-old]" {
		t.Errorf("removed %s", got)
	}
	if left := recordsLeft(rec); len(left) != 0 {
		t.Errorf("records left: %v", left)
	}
}

// With nothing left of the environment, its records go, and that is no error.
func TestNothingLeftForgetsTheRecords(t *testing.T) {
	for _, capd := range []bool{true, false} {
		t.Run(fmt.Sprintf("capd=%t", capd), func(t *testing.T) {
			tg := newTarget(t, capd)
			rec := records.Of(tg.State, tg.Environment)
			record(t, rec, records.Owned{"mgmt-lb": true})
			writeFile(t, rec.Adopted, []byte("https://10.0.0.1:6443\n")) // without its kubeconfig
			kind := &kindClusters{}
			host := &docker{}
			if err := Run(testContext(t), kind, host, tg, logf(t)); err != nil {
				t.Fatal(err)
			}
			if left := recordsLeft(rec); len(left) != 0 || len(kind.deleted)+len(host.removed) != 0 {
				t.Errorf("records left %v, kind clusters deleted %v, containers removed %v", left, kind.deleted, host.removed)
			}
		})
	}
}

// kindClusters stands in for kind, which needs Docker: its clusters are API servers, and Delete
// records the name and forgets the cluster.
type kindClusters struct {
	clusters map[string]*kube.Cluster
	deleted  []string
	// records is where kindcluster's records of the clusters it creates are (none: empty).
	records string
}

// Owns is kindcluster's own rule, on the clusters' markers and the records under k.records.
func (k *kindClusters) Owns(ctx context.Context, c *kube.Cluster, name, environment string) error {
	return kindcluster.New(k.records, func(string) {}).Owns(ctx, c, name, environment)
}

func (k *kindClusters) Exists(name string) (bool, error) {
	_, ok := k.clusters[name]
	return ok, nil
}

func (k *kindClusters) Connect(name string) (*kube.Cluster, error) {
	c, ok := k.clusters[name]
	if !ok {
		return nil, fmt.Errorf("no kind cluster %s", name)
	}
	return c, nil
}

func (k *kindClusters) Delete(name string) error {
	delete(k.clusters, name)
	k.deleted = append(k.deleted, name)
	return nil
}

// docker stands in for the host's containers: removed ones are recorded by name. fail makes the
// next removal fail, removing nothing, as a Docker daemon that does not answer.
type docker struct {
	containers []Container
	removed    []string
	fail       error
}

func (d *docker) Labelled(context.Context) ([]Container, error) {
	return slices.Clone(d.containers), nil
}

func (d *docker) Remove(_ context.Context, cs []Container) error {
	if err := d.fail; err != nil {
		d.fail = nil
		return err
	}
	for _, c := range cs {
		d.removed = append(d.removed, c.Name)
		d.containers = slices.DeleteFunc(d.containers, func(x Container) bool { return x.ID == c.ID })
	}
	return nil
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func logf(t *testing.T) func(string, ...any) {
	return func(format string, a ...any) { t.Logf("cleanup: "+format, a...) }
}

// newTarget is the environment's cluster, with a state directory of its own.
func newTarget(t *testing.T, capd bool) Target {
	return Target{Environment: env, State: statedir.Dir{Path: t.TempDir()}, Kind: kindName, Namespace: names.Namespace, Cluster: clusterName, CAPD: capd}
}

// bootstrapCluster is a kind cluster marked as bootstrapping environment, in which Cluster API is
// installed but does not run: envtest runs no controller, and its Deployment has no replica
// available.
func bootstrapCluster(t *testing.T, environment string) *kube.Cluster {
	ctx := testContext(t)
	c := testenv.Start(t, "bootstrap")
	if err := envmarker.Write(ctx, c.Client, environment); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, c, names.Namespace)
	createNamespace(t, c, "capi-system")
	create(t, c.Client, deployment("capi-system", "capi-controller-manager"))
	return c
}

func createNamespace(t *testing.T, c *kube.Cluster, name string) {
	t.Helper()
	err := c.Client.Create(testContext(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// namespaceController stands in for kube-controller-manager's namespace controller, which does
// not run in envtest: a deleted namespace is let go of its finalizer and deleted again, as that
// controller does once it has emptied it (what was in it is left; no test here reads it).
func namespaceController(t *testing.T, c *kube.Cluster) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for i := range list.Items {
				ns := &list.Items[i]
				if ns.DeletionTimestamp == nil {
					continue
				}
				ns.Spec.Finalizers = nil
				if _, err := cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err == nil {
					_ = cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
				}
			}
			return false, nil
		})
	}()
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(testContext(t), obj); err != nil {
		t.Fatal(err)
	}
}

func gone(t *testing.T, c client.Client, obj client.Object) bool {
	t.Helper()
	err := c.Get(testContext(t), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// deployment is a Deployment of one replica; none becomes available, since no controller runs.
func deployment(namespace, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "example.invalid/" + name}}}}}}
}

func newMachine(cluster, name, providerID, infrastructure string) *clusterv1.Machine {
	return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, ProviderID: providerID,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: new(string)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: infrastructure, Name: name}}}
}

// record writes the containers record as the bootstrap does.
func record(t *testing.T, rec records.Environment, owned records.Owned) {
	t.Helper()
	if err := records.MergeContainers(rec.Containers, owned); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// recordsLeft names the environment's records still on the machine.
func recordsLeft(rec records.Environment) []string {
	var left []string
	for _, path := range []string{rec.Kubeconfig, rec.Containers, rec.Adopted} {
		if _, err := os.Stat(path); err == nil {
			left = append(left, filepath.Base(path))
		}
	}
	return left
}

func stateExists(t *testing.T, d standalone.Dir) bool {
	t.Helper()
	ok, err := d.Exists()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// kubeconfigOf is a kubeconfig of the API server at server.
func kubeconfigOf(t *testing.T, server string) []byte {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	kc.AuthInfos["c"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "c"}
	kc.CurrentContext = "c"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
