package upgrades

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"golang.org/x/mod/semver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// What a plan says of a cluster or a component.
const (
	UpToDate     = "up to date"
	Upgrade      = "upgrade"
	Rolling      = "rolling"
	Refused      = "refused"
	NotInstalled = "not installed"
)

// Plan is what `bootstrap upgrade plan` shows: every cluster and component, what runs, what the
// checkout (or the cluster's committed release) asks for, and whether the step is allowed.
type Plan struct {
	Clusters   []Cluster   `json:"clusters"`
	Components []Component `json:"components"`
}

// Cluster is one Cluster API cluster of the management cluster (itself included).
type Cluster struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ControlPlane is the version the control plane is asked to run (spec.version);
	// ControlPlaneRuns the oldest its machines run (status.version).
	ControlPlane     string   `json:"controlPlane"`
	ControlPlaneRuns string   `json:"controlPlaneRuns,omitempty"`
	Workers          []string `json:"workers,omitempty"`
	// Asked is the version asked for, and AskedBy where it is asked.
	Asked   string `json:"asked"`
	AskedBy string `json:"askedBy"`
	Action  string `json:"action"`
	// Reason says why a step is refused.
	Reason string `json:"reason,omitempty"`
}

// Component is one controller of the management cluster.
type Component struct {
	Unit       string `json:"unit"`
	Deployment string `json:"deployment"`
	Running    string `json:"running,omitempty"`
	Checkout   string `json:"checkout"`
	Action     string `json:"action"`
	// Reason says why a step is refused.
	Reason string `json:"reason,omitempty"`
}

// Checkout is what the checkout installs in the management cluster: the controllers and the
// CustomResourceDefinitions of each unit.
type Checkout struct {
	Deployments []WantedDeployment
	CRDs        []WantedCRD
	// Units are the Flux Kustomizations that apply them, by unit name.
	Units map[string]client.ObjectKey
}

// WantedDeployment is a Deployment the checkout renders, with its images.
type WantedDeployment struct {
	Unit, Namespace, Name string
	Images                []string
}

// WantedCRD is a CustomResourceDefinition the checkout renders, with the versions it defines.
type WantedCRD struct {
	Unit, Name string
	Versions   []string
}

// ManagementCluster names the management cluster and the version the checkout asks of it.
type ManagementCluster struct {
	Namespace, Name, Asked string
}

// platformDefaults is the ConfigMap (charts/workload-clusters) whose values a tenant's cluster
// takes when its HelmRelease names no version.
const platformDefaults = "workload-cluster-platform"

// Clusters reads every Cluster of the management cluster and the step each is asked to take.
func Clusters(ctx context.Context, c client.Client, m ManagementCluster) ([]Cluster, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterList"})
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list the Clusters: %w", err)
	}
	var out []Cluster
	for _, item := range list.Items {
		cl := Cluster{Namespace: item.GetNamespace(), Name: item.GetName()}
		if err := controlPlane(ctx, c, &item, &cl); err != nil {
			return nil, err
		}
		if err := workers(ctx, c, &cl); err != nil {
			return nil, err
		}
		if cl.Namespace == m.Namespace && cl.Name == m.Name {
			cl.Asked, cl.AskedBy = m.Asked, "the checkout's values"
		} else if err := askedByRelease(ctx, c, &cl); err != nil {
			return nil, err
		}
		decide(&cl)
		out = append(out, cl)
	}
	slices.SortFunc(out, func(a, b Cluster) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out, nil
}

func controlPlane(ctx context.Context, c client.Client, cluster *unstructured.Unstructured, cl *Cluster) error {
	group, _, _ := unstructured.NestedString(cluster.Object, "spec", "controlPlaneRef", "apiGroup")
	kind, _, _ := unstructured.NestedString(cluster.Object, "spec", "controlPlaneRef", "kind")
	name, _, _ := unstructured.NestedString(cluster.Object, "spec", "controlPlaneRef", "name")
	if kind == "" {
		return nil
	}
	mapping, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: kind})
	if err != nil {
		return fmt.Errorf("the control plane of cluster %s/%s: %w", cl.Namespace, cl.Name, err)
	}
	cp := &unstructured.Unstructured{}
	cp.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: name}, cp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("read %s %s/%s: %w", kind, cl.Namespace, name, err)
	}
	cl.ControlPlane, _, _ = unstructured.NestedString(cp.Object, "spec", "version")
	cl.ControlPlaneRuns, _, _ = unstructured.NestedString(cp.Object, "status", "version")
	return nil
}

func workers(ctx context.Context, c client.Client, cl *Cluster) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeploymentList"})
	if err := c.List(ctx, list, client.InNamespace(cl.Namespace), client.MatchingLabels{"cluster.x-k8s.io/cluster-name": cl.Name}); err != nil {
		return fmt.Errorf("list the MachineDeployments of cluster %s/%s: %w", cl.Namespace, cl.Name, err)
	}
	for _, md := range list.Items {
		v, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "version")
		if v != "" && !slices.Contains(cl.Workers, v) {
			cl.Workers = append(cl.Workers, v)
		}
	}
	slices.Sort(cl.Workers)
	return nil
}

// askedByRelease reads the version a workload cluster's committed HelmRelease asks for, or the
// platform's default it takes when it names none.
func askedByRelease(ctx context.Context, c client.Client, cl *Cluster) error {
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"})
	if err := c.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: cl.Name}, hr); err != nil {
		if apierrors.IsNotFound(err) {
			cl.AskedBy = "no HelmRelease " + cl.Namespace + "/" + cl.Name
			return nil
		}
		return fmt.Errorf("read HelmRelease %s/%s: %w", cl.Namespace, cl.Name, err)
	}
	if v, _, _ := unstructured.NestedString(hr.Object, "spec", "values", "cluster", "kubernetes_version"); v != "" {
		cl.Asked, cl.AskedBy = v, "HelmRelease "+cl.Namespace+"/"+cl.Name
		return nil
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: platformDefaults}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			cl.AskedBy = "HelmRelease " + cl.Namespace + "/" + cl.Name + " (no version)"
			return nil
		}
		return fmt.Errorf("read ConfigMap %s/%s: %w", cl.Namespace, platformDefaults, err)
	}
	var defaults struct {
		Cluster struct {
			KubernetesVersion string `json:"kubernetes_version"`
		} `json:"cluster"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["values.yaml"]), &defaults); err != nil {
		return fmt.Errorf("read ConfigMap %s/%s: values.yaml: %w", cl.Namespace, platformDefaults, err)
	}
	cl.Asked, cl.AskedBy = defaults.Cluster.KubernetesVersion, "the platform's default (the management cluster's version)"
	return nil
}

// decide applies the rules to a cluster's step.
func decide(cl *Cluster) {
	running := cl.ControlPlane
	switch {
	case running == "" || cl.Asked == "":
		cl.Action = "unknown"
	case semver.Compare(kubernetesOf(running), kubernetesOf(cl.Asked)) == 0:
		cl.Action = UpToDate
		if cl.ControlPlaneRuns != "" && semver.Compare(kubernetesOf(cl.ControlPlaneRuns), kubernetesOf(running)) != 0 {
			cl.Action = Rolling
		}
		for _, w := range cl.Workers {
			if semver.Compare(kubernetesOf(w), kubernetesOf(running)) != 0 {
				cl.Action = Rolling
			}
		}
	default:
		if err := Step(kubernetesOf(running), kubernetesOf(cl.Asked)); err != nil {
			cl.Action, cl.Reason = Refused, err.Error()
			return
		}
		for _, w := range cl.Workers {
			if err := Step(kubernetesOf(w), kubernetesOf(cl.Asked)); err != nil {
				cl.Action, cl.Reason = Refused, "workers: "+err.Error()
				return
			}
		}
		cl.Action = Upgrade
	}
}

// kubernetesOf is the Kubernetes version of a control plane's version (RKE2's carry a build
// suffix: v1.37.0+rke2r1).
func kubernetesOf(v string) string {
	k, _, _ := strings.Cut(v, "+")
	return k
}

// Components compares the controllers the checkout installs with those running, and refuses a
// unit's step when applying it would fail or lose data: a CustomResourceDefinition that drops a
// version the API server still stores objects in (the API server refuses it; `clusterctl
// upgrade` migrates them first), a CustomResourceDefinition the unit applied and the
// checkout no longer has (Flux would prune it, and every object of it with it, where clusterctl
// keeps it), or an image older than the one running (Cluster API and Flux support no downgrade:
// stored objects may carry what the older controller drops).
func Components(ctx context.Context, c client.Reader, checkout Checkout) ([]Component, error) {
	refused, err := droppedCRDs(ctx, c, checkout)
	if err != nil {
		return nil, err
	}
	for _, w := range checkout.CRDs {
		if refused[w.Unit] != "" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: w.Name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read CustomResourceDefinition %s: %w", w.Name, err)
		}
		for _, stored := range crd.Status.StoredVersions {
			if !slices.Contains(w.Versions, stored) && refused[w.Unit] == "" {
				refused[w.Unit] = fmt.Sprintf("CustomResourceDefinition %s still stores objects in %s, which the checkout's definition drops: "+
					"they must be migrated first (each provider's CRD migrator does it after an upgrade: take one minor at a time)", w.Name, stored)
			}
		}
	}
	var out []Component
	for _, w := range checkout.Deployments {
		comp := Component{Unit: w.Unit, Deployment: w.Namespace + "/" + w.Name, Checkout: strings.Join(w.Images, ", ")}
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Name}, d); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("read Deployment %s: %w", comp.Deployment, err)
			}
			comp.Action = NotInstalled
			out = append(out, comp)
			continue
		}
		var running []string
		for _, ctr := range d.Spec.Template.Spec.Containers {
			running = append(running, ctr.Image)
		}
		comp.Running = strings.Join(running, ", ")
		comp.Action = UpToDate
		if comp.Running != comp.Checkout {
			comp.Action = Upgrade
			if reason := downgrade(running, w.Images); reason != "" {
				comp.Action, comp.Reason = Refused, reason
			}
		}
		if reason := refused[w.Unit]; reason != "" {
			comp.Action, comp.Reason = Refused, reason
		}
		out = append(out, comp)
	}
	// A unit refused for its CRDs shows even when none of its controllers changes.
	for unit, reason := range refused {
		if !slices.ContainsFunc(out, func(c Component) bool { return c.Unit == unit }) {
			out = append(out, Component{Unit: unit, Action: Refused, Reason: reason})
		}
	}
	slices.SortFunc(out, func(a, b Component) int {
		return strings.Compare(a.Unit+" "+a.Deployment, b.Unit+" "+b.Deployment)
	})
	return out, nil
}

// droppedCRDs names, per unit, a CustomResourceDefinition its Kustomization applied (its
// inventory) that the checkout no longer renders in it. One the checkout moves to another unit is
// refused too: the unit that had it may prune it before the other takes it over (Flux deletes
// what still carries the unit's labels).
func droppedCRDs(ctx context.Context, c client.Reader, checkout Checkout) (map[string]string, error) {
	renderedIn := map[string][]string{}
	for _, w := range checkout.CRDs {
		renderedIn[w.Name] = append(renderedIn[w.Name], w.Unit)
	}
	refused := map[string]string{}
	for unit, key := range checkout.Units {
		ks := &kustomizev1.Kustomization{}
		if err := c.Get(ctx, key, ks); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read Kustomization %s of unit %s: %w", key, unit, err)
		}
		if ks.Status.Inventory == nil {
			continue
		}
		for _, e := range ks.Status.Inventory.Entries {
			id, err := object.ParseObjMetadata(e.ID)
			if err != nil {
				return nil, fmt.Errorf("read the inventory of Kustomization %s (unit %s): entry %q: %w", key, unit, e.ID, err)
			}
			if id.GroupKind != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) || slices.Contains(renderedIn[id.Name], unit) {
				continue
			}
			if others := renderedIn[id.Name]; len(others) > 0 {
				refused[unit] = fmt.Sprintf("the checkout moves CustomResourceDefinition %s to unit %s: this unit may prune it, with every object of it, "+
					"before the other takes it over; move it in two commits (first into both units, then out of this one)", id.Name, strings.Join(others, ", "))
			} else {
				refused[unit] = fmt.Sprintf("the checkout no longer has CustomResourceDefinition %s, which Flux would delete with every object of it: "+
					"keep it in the unit (clusterctl keeps a provider's dropped definitions)", id.Name)
			}
			break
		}
	}
	return refused, nil
}

// downgrade names the first checkout image with an older version tag than the running image of
// the same name (containers are paired by image, not position: a sidecar may come or go).
func downgrade(running, checkout []string) string {
	runningTags := map[string]string{}
	for _, img := range running {
		name, tag := splitTag(img)
		runningTags[name] = tag
	}
	for _, img := range checkout {
		name, want := splitTag(img)
		have, ok := runningTags[name]
		if !ok {
			continue
		}
		if !strings.HasPrefix(have, "v") {
			have, want = "v"+have, "v"+want
		}
		if semver.IsValid(have) && semver.IsValid(want) && semver.Compare(want, have) < 0 {
			return fmt.Sprintf("a downgrade is not supported: %s runs %s, the checkout asks for %s", path.Base(name), have, want)
		}
	}
	return ""
}

// splitTag splits an image reference into its name and tag (a registry's port is not a tag).
func splitTag(image string) (string, string) {
	image, _, _ = strings.Cut(image, "@")
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return image, ""
	}
	return image[:i], image[i+1:]
}
