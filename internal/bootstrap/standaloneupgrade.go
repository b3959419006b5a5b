package bootstrap

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
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/standalone"
	"cluster-init.dev/cluster-init/internal/upgrades"
)

// checkStandaloneUpgrade refuses, before anything is created, a step the rules do not allow or a
// cluster this command cannot upgrade yet. A continued upgrade to the same version is not
// checked again: its control plane may already run it.
func checkStandaloneUpgrade(st *standalone.State, asked string) error {
	if p := st.Pending; p != nil && p.Command == standalone.CommandUpgrade && p.KubernetesVersion == asked {
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

// upgradeCluster asks the control plane and the workers for the new version, each with a machine
// template of the node image of that version, and waits until every machine runs it. The
// control plane is asked first; Cluster API's MachineSet preflight checks hold the workers' new
// machines until the control plane has rolled.
func upgradeCluster(ctx context.Context, s *session, d standalone.Dir, st *standalone.State, mc *kube.Cluster, version string) error {
	st.Pending.Applied = true
	if err := d.Save(st); err != nil {
		return err
	}
	cp, err := controlPlaneOf(ctx, mc, st.Namespace, st.Cluster)
	if err != nil {
		return err
	}
	if err := askVersion(ctx, s, mc, cp, version, []string{"spec", "version"}, []string{"spec", "machineTemplate", "spec", "infrastructureRef"}); err != nil {
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
		if err := askVersion(ctx, s, mc, md, version, []string{"spec", "template", "spec", "version"}, []string{"spec", "template", "spec", "infrastructureRef"}); err != nil {
			return err
		}
	}
	nodes, err := clusterOf(ctx, mc, st.Cluster)
	if err != nil {
		return fmt.Errorf("connect to cluster %s to read its nodes: %w", st.Cluster, err)
	}
	return rollMachines(ctx, s, mc, nodes, st.Namespace, st.Cluster, version)
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
func askVersion(ctx context.Context, s *session, mc *kube.Cluster, obj *unstructured.Unstructured, version string, versionPath, templatePath []string) error {
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
	s.out.Log("%s: Kubernetes %s, node image %s (%s %s)", what, version, newImage, tplKind, next.GetName())
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

// rollMachines waits until every machine of the cluster runs version with a Ready node, saying
// what it waits for.
func rollMachines(ctx context.Context, s *session, c, nodes *kube.Cluster, namespace, name, version string) error {
	const timeout = 40 * time.Minute
	var last []string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		v, err := machines.Read(ctx, c.Client, namespace, name)
		if err == nil {
			err = v.CheckNodes(ctx, nodes.Client)
		}
		if err != nil {
			last = []string{err.Error()}
			return false, nil
		}
		ok, pending := v.Settled()
		older := 0
		for _, m := range v.Machines {
			if m.Version != version {
				older++
			}
		}
		if ok && older == 0 {
			s.out.Log("cluster %s: its %d machines run Kubernetes %s", name, len(v.Machines), version)
			return true, nil
		}
		if older > 0 {
			pending = append([]string{fmt.Sprintf("%d of %d machines not at %s yet", older, len(v.Machines), version)}, pending...)
		}
		last = pending
		s.out.Waiting(fmt.Sprintf("the roll of %s to %s", name, version), pending)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: not rolled to %s within %s: %v", name, version, timeout, last)
	}
	return nil
}
