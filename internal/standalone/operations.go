package standalone

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/clusterdeletion"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/upgrades"
)

// The changes a command makes in the temporary management cluster, once the cluster's objects
// are restored there. Each is safe to make again: the step machine records it begun before it
// runs and done after.

// waitInterval is how often the waits of a change look.
const waitInterval = 3 * time.Second

// scale sets the replicas of the workers' MachineDeployment and of the control plane, and waits
// until the cluster has them, every node ready.
func scale(ctx context.Context, out Reporter, mc *kube.Cluster, st *State, c Change) error {
	if c.Workers != nil {
		mds := &clusterv1.MachineDeploymentList{}
		if err := mc.Client.List(ctx, mds, client.InNamespace(st.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: st.Cluster}); err != nil {
			return fmt.Errorf("list the MachineDeployments of %s: %w", st.Cluster, err)
		}
		if len(mds.Items) != 1 {
			return fmt.Errorf("cluster %s has %d MachineDeployments: --workers scales a cluster with exactly one", st.Cluster, len(mds.Items))
		}
		if err := setReplicas(ctx, mc, &mds.Items[0], *c.Workers); err != nil {
			return err
		}
		out.Log("MachineDeployment %s: %d replicas", mds.Items[0].Name, *c.Workers)
	}
	if c.ControlPlane != nil {
		cp, err := controlPlaneOf(ctx, mc, st.Namespace, st.Cluster)
		if err != nil {
			return err
		}
		if err := setReplicas(ctx, mc, cp, *c.ControlPlane); err != nil {
			return err
		}
		out.Log("%s %s: %d replicas", cp.GetKind(), cp.GetName(), *c.ControlPlane)
	}
	return settle(ctx, out, mc, st, "")
}

// settle waits until the machines of the cluster are ready (at version, if set), as its own API
// says.
func settle(ctx context.Context, out Reporter, mc *kube.Cluster, st *State, version string) error {
	nodes, err := kube.ClusterAPICluster(ctx, mc.Client, st.Namespace, st.Cluster)
	if err != nil {
		return fmt.Errorf("connect to cluster %s to read its nodes: %w", st.Cluster, err)
	}
	timeout := 30 * time.Minute
	if version != "" {
		timeout = 40 * time.Minute
	}
	v, err := machines.WaitSettled(ctx, mc.Client, nodes.Client, machines.Settling{
		Namespace: st.Namespace, Name: st.Cluster, Version: version, Timeout: timeout, Interval: waitInterval, Progress: out.Waiting,
	})
	if err != nil {
		return err
	}
	if version != "" {
		out.Log("cluster %s: its %d machines run Kubernetes %s", st.Cluster, len(v.Machines), version)
	} else {
		out.Log("cluster %s has its %d machines ready", st.Cluster, len(v.Machines))
	}
	return nil
}

func setReplicas(ctx context.Context, mc *kube.Cluster, obj client.Object, replicas int) error {
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))
	if err := mc.Client.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("set the replicas of %s to %d: %w", obj.GetName(), replicas, err)
	}
	return nil
}

// deleteCluster deletes the Cluster and waits until Cluster API has deleted its machines and it
// is gone.
func deleteCluster(ctx context.Context, out Reporter, mc *kube.Cluster, st *State) error {
	const timeout = 20 * time.Minute
	_, err := clusterdeletion.Run(ctx, mc.Client, clusterdeletion.Deletion{
		Clusters: []client.ObjectKey{{Namespace: st.Namespace, Name: st.Cluster}},
		Timeout:  timeout,
		Interval: waitInterval,
		Progress: func(left []machines.View, _ time.Duration) {
			for _, v := range left {
				out.Waiting(fmt.Sprintf("the deletion of cluster %s (%d machines left)", st.Cluster, len(v.Machines)), v.Lines())
			}
		},
	})
	if err != nil {
		return fmt.Errorf("cluster %s not deleted within %s: %w", st.Cluster, timeout, err)
	}
	out.Log("cluster %s and its machines are deleted", st.Cluster)
	return nil
}

// checkUpgrade refuses, before anything is created, a step the rules do not allow or a
// cluster this command cannot upgrade yet. A continued upgrade to the same version is not
// checked again: its control plane may already run it.
func checkUpgrade(st *State, asked string) error {
	if p := st.Pending; p != nil && p.Command == CommandUpgrade && p.KubernetesVersion == asked {
		return nil
	}
	if st.Bootstrap != "kubeadm" || st.Infrastructure != "capd" {
		return fmt.Errorf("standalone cluster %s (%s, %s): upgrade supports kubeadm on CAPD so far (an RKE2 release or an OpenStack image of the new version is not derived from the version yet)", st.Cluster, st.Bootstrap, st.Infrastructure)
	}
	if err := upgrades.Step(st.KubernetesVersion, asked); err != nil {
		return fmt.Errorf("standalone cluster %s runs Kubernetes %s: --kubernetes-version %w", st.Cluster, st.KubernetesVersion, err)
	}
	if asked == st.KubernetesVersion {
		return fmt.Errorf("standalone cluster %s already runs Kubernetes %s", st.Cluster, asked)
	}
	return nil
}

// upgrade asks the control plane and the workers for the new version, each with a machine
// template of the node image of that version, and waits until every machine runs it. The
// control plane is asked first; Cluster API's MachineSet preflight checks hold the workers' new
// machines until the control plane has rolled.
func upgrade(ctx context.Context, out Reporter, mc *kube.Cluster, st *State, version string) error {
	cp, err := controlPlaneOf(ctx, mc, st.Namespace, st.Cluster)
	if err != nil {
		return err
	}
	if err := askVersion(ctx, out, mc, cp, version, []string{"spec", "version"}, []string{"spec", "machineTemplate", "spec", "infrastructureRef"}); err != nil {
		return err
	}
	mds := &clusterv1.MachineDeploymentList{}
	if err := mc.Client.List(ctx, mds, client.InNamespace(st.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: st.Cluster}); err != nil {
		return fmt.Errorf("list the MachineDeployments of %s: %w", st.Cluster, err)
	}
	for i := range mds.Items {
		md := &unstructured.Unstructured{}
		md.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("MachineDeployment"))
		if err := mc.Client.Get(ctx, client.ObjectKeyFromObject(&mds.Items[i]), md); err != nil {
			return fmt.Errorf("read MachineDeployment %s: %w", mds.Items[i].Name, err)
		}
		if err := askVersion(ctx, out, mc, md, version, []string{"spec", "template", "spec", "version"}, []string{"spec", "template", "spec", "infrastructureRef"}); err != nil {
			return err
		}
	}
	return settle(ctx, out, mc, st, version)
}

// controlPlaneOf reads the control plane object of a cluster, whatever its provider.
func controlPlaneOf(ctx context.Context, mc *kube.Cluster, namespace, cluster string) (*unstructured.Unstructured, error) {
	cl := &clusterv1.Cluster{}
	if err := mc.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster}, cl); err != nil {
		return nil, fmt.Errorf("read Cluster %s: %w", cluster, err)
	}
	ref := cl.Spec.ControlPlaneRef
	mapping, err := mc.Mapper.RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if err != nil {
		return nil, fmt.Errorf("control plane %s %s: %w", ref.Kind, ref.Name, err)
	}
	cp := &unstructured.Unstructured{}
	cp.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := mc.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, cp); err != nil {
		return nil, fmt.Errorf("read %s %s: %w", ref.Kind, ref.Name, err)
	}
	return cp, nil
}

// askVersion sets the version of a control plane or MachineDeployment and points it at a copy of
// its CAPD machine template with the node image of that version (templates are immutable).
func askVersion(ctx context.Context, out Reporter, mc *kube.Cluster, obj *unstructured.Unstructured, version string, versionPath, templatePath []string) error {
	what := obj.GetKind() + " " + obj.GetName()
	tplName, _, _ := unstructured.NestedString(obj.Object, append(templatePath, "name")...)
	tplKind, _, _ := unstructured.NestedString(obj.Object, append(templatePath, "kind")...)
	tplGroup, _, _ := unstructured.NestedString(obj.Object, append(templatePath, "apiGroup")...)
	mapping, err := mc.Mapper.RESTMapping(schema.GroupKind{Group: tplGroup, Kind: tplKind})
	if err != nil {
		return fmt.Errorf("the machine template of %s: %w", what, err)
	}
	tpl := &unstructured.Unstructured{}
	tpl.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := mc.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: tplName}, tpl); err != nil {
		return fmt.Errorf("read %s %s: %w", tplKind, tplName, err)
	}
	spec, _, _ := unstructured.NestedMap(tpl.Object, "spec", "template", "spec")
	image, _, _ := unstructured.NestedString(spec, "customImage")
	newImage, err := nodeImageOf(image, version)
	if err != nil {
		return fmt.Errorf("%s %s: %w", tplKind, tplName, err)
	}
	spec["customImage"] = newImage
	next := &unstructured.Unstructured{}
	next.SetGroupVersionKind(tpl.GroupVersionKind())
	next.SetNamespace(tpl.GetNamespace())
	next.SetName(templateName(tplName, spec))
	next.SetLabels(tpl.GetLabels())
	next.SetAnnotations(tpl.GetAnnotations())
	if err := unstructured.SetNestedMap(next.Object, spec, "spec", "template", "spec"); err != nil {
		return err
	}
	if err := mc.Client.Create(ctx, next); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s %s: %w", tplKind, next.GetName(), err)
	}
	patch := map[string]any{}
	setIn(patch, versionPath, version)
	setIn(patch, append(templatePath, "name"), next.GetName())
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := mc.Client.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", data)); err != nil {
		return fmt.Errorf("ask %s for Kubernetes %s: %w", what, version, err)
	}
	out.Log("%s: Kubernetes %s, node image %s (%s %s)", what, version, newImage, tplKind, next.GetName())
	return nil
}

// nodeImageOf is the node image of version in the repository of image (kindest/node when none).
func nodeImageOf(image, version string) (string, error) {
	if image == "" {
		return "kindest/node:" + version, nil
	}
	ref, err := name.NewTag(image)
	if err != nil {
		return "", fmt.Errorf("node image %q: %w: expected repository:version", image, err)
	}
	if !strings.HasPrefix(ref.TagStr(), "v") {
		return "", fmt.Errorf("node image %q names no Kubernetes version: the image of %s cannot be derived from it", image, version)
	}
	repo := strings.TrimSuffix(image, ":"+ref.TagStr())
	return repo + ":" + version, nil
}

// templateName is the name of a machine template with spec: its name without the hash the chart
// gives it (capi-cluster.templateName), and the hash of spec, as the chart would name it.
func templateName(old string, spec map[string]any) string {
	data, _ := json.Marshal(spec)
	sum := sha256.Sum256(data)
	base := old
	if i := strings.LastIndex(old, "-"); i > 0 && len(old)-i-1 == 8 {
		base = old[:i]
	}
	return base + "-" + hex.EncodeToString(sum[:])[:8]
}

func setIn(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}
