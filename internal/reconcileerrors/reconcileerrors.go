// Package reconcileerrors finds the last error a Cluster API provider's controller logged while
// reconciling an object. A provider that fails before it can set a condition (CAPO that cannot
// authenticate to its cloud returns the error from the reconcile, with no condition and no event)
// says why only there; the conclusion of a stuck bootstrap quotes it.
//
// The controller is found as clusterctl finds providers: the object's CRD carries the label
// cluster.x-k8s.io/provider, and so do the provider's pods. Both log formats of Kubernetes
// components are read: text (klog's key="value") and JSON. When a line was written is the
// kubelet's timestamp of it (the log API's timestamps option), not the format's own, which klog
// writes without a year or zone.
package reconcileerrors

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
)

// ProviderLabel names the provider of a CRD and of its controller's pods (clusterctl's contract).
const ProviderLabel = "cluster.x-k8s.io/provider"

// tailLines is how much of each controller's log is read: the last errors of a controller that
// retries with back-off, not its history.
const tailLines = int64(2000)

// Found is the last reconcile error of an object.
type Found struct {
	// Kind is the kind of the object the error was logged for.
	Kind     string
	Provider string    // the provider label, such as infrastructure-openstack
	Pod      string    // namespace/name of the pod that logged it
	Time     time.Time // when the kubelet received the line
	Error    string
	// Count is how many times the lines read hold an error for the object.
	Count int
}

func (f Found) String() string {
	return fmt.Sprintf("%s controller (%s), %d times in its recent log, last at %s: %s", f.Provider, f.Pod, f.Count, f.Time.UTC().Format(time.TimeOnly), f.Error)
}

// Last finds the last reconcile error logged for the object kind namespace/name (group is the
// kind's API group); found is false when the provider logged none in the lines read.
func Last(ctx context.Context, c *kube.Cluster, gk schema.GroupKind, namespace, name string) (Found, bool, error) {
	return last(ctx, c, gk, namespace, name, gk.Kind)
}

// LastNamed is Last for every kind of the object's provider: a provider that makes objects of its
// own named after a machine's (CAPO's OpenStackServer, after the OpenStackMachine) logs the
// error of the machine under that kind.
func LastNamed(ctx context.Context, c *kube.Cluster, gk schema.GroupKind, namespace, name string) (Found, bool, error) {
	return last(ctx, c, gk, namespace, name, "")
}

// last reads the logs of gk's provider for the errors of namespace/name of kind ("" any kind).
func last(ctx context.Context, c *kube.Cluster, gk schema.GroupKind, namespace, name, kind string) (Found, bool, error) {
	mapping, err := c.Mapper.RESTMapping(gk)
	if err != nil {
		return Found{}, false, fmt.Errorf("the resource of %s: %w", gk, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crdName := mapping.Resource.Resource + "." + gk.Group
	if err := c.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		return Found{}, false, fmt.Errorf("read CRD %s: %w", crdName, err)
	}
	provider := crd.Labels[ProviderLabel]
	if provider == "" {
		return Found{}, false, fmt.Errorf("CRD %s has no %s label: its controller is not known", crdName, ProviderLabel)
	}
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.MatchingLabels{ProviderLabel: provider}); err != nil {
		return Found{}, false, fmt.Errorf("list the pods of provider %s: %w", provider, err)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return Found{}, false, fmt.Errorf("client of %s: %w", c.Name, err)
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	var last Found
	found, total := false, 0
	for _, p := range pods.Items {
		for _, ctr := range p.Spec.Containers {
			tail := tailLines
			stream, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, TailLines: &tail, Timestamps: true}).Stream(ctx)
			if err != nil {
				continue // a container not started yet has no log
			}
			f, ok := scan(stream, kind, namespace, name)
			stream.Close()
			if !ok {
				continue
			}
			total += f.Count
			if !found || f.Time.After(last.Time) {
				f.Provider, f.Pod = provider, p.Namespace+"/"+p.Name
				last, found = f, true
			}
		}
	}
	last.Count = total
	return last, found, nil
}

// klogHeader starts a line of klog's text format (severity, date and time); klogPair is one of
// the key="value" pairs after it.
var (
	klogHeader = regexp.MustCompile(`^[EWI]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s`)
	klogPair   = regexp.MustCompile(`([A-Za-z][A-Za-z0-9_.]*)=("(?:[^"\\]|\\.)*"|\S+)`)
)

// scan reads a controller's log, each line after the kubelet's timestamp (RFC 3339), for the
// reconcile errors of one object (of any kind when kind is empty).
func scan(r io.Reader, kind, namespace, name string) (Found, bool) {
	var last Found
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		stamp, line, _ := strings.Cut(sc.Text(), " ")
		if !strings.Contains(line, "Reconciler error") {
			continue
		}
		when, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			continue
		}
		var fields map[string]string
		if strings.HasPrefix(line, "{") {
			fields = jsonFields(line)
		} else {
			fields = textFields(line)
		}
		if fields == nil || fields["msg"] != "Reconciler error" && !strings.Contains(line, `"Reconciler error"`) {
			continue
		}
		if (kind != "" && fields["controllerKind"] != kind) || fields["namespace"] != namespace || fields["name"] != name {
			continue
		}
		last.Count++
		last.Time, last.Error, last.Kind = when, fields["err"], fields["controllerKind"]
	}
	return last, last.Count > 0
}

func textFields(line string) map[string]string {
	if !klogHeader.MatchString(line) {
		return nil
	}
	fields := map[string]string{}
	for _, m := range klogPair.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		}
		if _, seen := fields[m[1]]; !seen {
			fields[m[1]] = v
		}
	}
	return fields
}

func jsonFields(line string) map[string]string {
	var raw map[string]any
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		return nil
	}
	fields := map[string]string{}
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			fields[k] = v
		case float64:
			fields[k] = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	return fields
}

// OfCluster looks for the last reconcile errors of the objects a Cluster API cluster waits for:
// its infrastructure while it is not ready, its control plane while it is not initialized, and
// the infrastructure and bootstrap config of every machine not ready. Each line names the object
// and what its provider logged; objects whose providers logged nothing are left out.
func OfCluster(ctx context.Context, c *kube.Cluster, namespace, name string) ([]string, error) {
	cl := &clusterv1.Cluster{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cl); err != nil {
		return nil, fmt.Errorf("read Cluster %s: %w", name, err)
	}
	var refs []clusterv1.ContractVersionedObjectReference
	if !conditionTrue(cl.Status.Conditions, clusterv1.ClusterInfrastructureReadyCondition) {
		refs = append(refs, cl.Spec.InfrastructureRef)
	}
	if !conditionTrue(cl.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition) {
		refs = append(refs, cl.Spec.ControlPlaneRef)
	}
	list := &clusterv1.MachineList{}
	if err := c.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return nil, fmt.Errorf("list the Machines of %s: %w", name, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	// machineInfra marks the refs that are a machine's infrastructure.
	machineInfra := make([]bool, len(refs))
	for _, m := range list.Items {
		if !conditionTrue(m.Status.Conditions, clusterv1.MachineReadyCondition) {
			refs = append(refs, m.Spec.InfrastructureRef, m.Spec.Bootstrap.ConfigRef)
			machineInfra = append(machineInfra, true, false)
		}
	}
	var lines []string
	// said are the messages of the failed conditions shown: a logged error that only wraps one of
	// them is not said twice.
	var said []string
	for i, ref := range refs {
		if !ref.IsDefined() {
			continue
		}
		gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
		find := Last
		if machineInfra[i] {
			// What the infrastructure says of the machine and of its provider's other objects
			// named after it, and what the provider logged for any of them.
			for _, f := range failedNamed(ctx, c, gk, namespace, ref.Name) {
				lines = append(lines, f.line)
				if f.message != "" {
					said = append(said, f.message)
				}
			}
			find = LastNamed
		}
		f, ok, err := find(ctx, c, gk, namespace, ref.Name)
		if err != nil {
			lines = append(lines, fmt.Sprintf("%s %s: its controller's log could not be read: %v", ref.Kind, ref.Name, err))
			continue
		}
		if ok && !slices.ContainsFunc(said, func(msg string) bool { return strings.Contains(f.Error, msg) }) {
			kind := f.Kind
			if kind == "" {
				kind = ref.Kind
			}
			lines = append(lines, fmt.Sprintf("%s %s: %s", kind, ref.Name, f))
		}
	}
	return lines, nil
}

// failedNamed is failed for every namespaced kind of gk's provider (its CRDs carry the
// provider's label) that has an object of that name: CAPO says a machine's server went to ERROR
// on the OpenStackServer named after the OpenStackMachine, and logs no error for it. The kinds
// come from the CRDs themselves, at their storage version: a REST mapper made before the provider
// was installed would not know them.
func failedNamed(ctx context.Context, c *kube.Cluster, gk schema.GroupKind, namespace, name string) []failure {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.Client.List(ctx, crds); err != nil {
		return []failure{{line: fmt.Sprintf("%s %s: the provider's kinds could not be listed: %v", gk.Kind, name, err)}}
	}
	provider := ""
	for _, crd := range crds.Items {
		if crd.Spec.Group == gk.Group && crd.Spec.Names.Kind == gk.Kind {
			provider = crd.Labels[ProviderLabel]
		}
	}
	sort.Slice(crds.Items, func(i, j int) bool { return crds.Items[i].Name < crds.Items[j].Name })
	var out []failure
	for _, crd := range crds.Items {
		own := crd.Spec.Group == gk.Group && crd.Spec.Names.Kind == gk.Kind
		if crd.Spec.Scope != apiextensionsv1.NamespaceScoped || !own && (provider == "" || crd.Labels[ProviderLabel] != provider) {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				out = append(out, failed(ctx, c, schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}, namespace, name)...)
			}
		}
	}
	return out
}

// failure is a line of the conclusion, and the message of the failed condition it shows, if any.
type failure struct{ line, message string }

// failed are the conditions an infrastructure object reports False with severity Error, and its
// failure message: how a provider says a machine failed when it logs no error for it.
func failed(ctx context.Context, c *kube.Cluster, gvk schema.GroupVersionKind, namespace, name string) []failure {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(gvk)
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, o); err != nil {
		return nil
	}
	var out []failure
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	failing := 0
	for _, raw := range conds {
		if cond, _ := raw.(map[string]any); cond["status"] == "False" && cond["severity"] == "Error" {
			failing++
		}
	}
	for _, raw := range conds {
		cond, _ := raw.(map[string]any)
		if cond["status"] != "False" || cond["severity"] != "Error" {
			continue
		}
		// Ready sums the others up: said once is enough.
		if cond["type"] == "Ready" && failing > 1 {
			continue
		}
		f := failure{line: fmt.Sprintf("%s %s: %v is False: %v", gvk.Kind, name, cond["type"], cond["reason"])}
		if msg, _ := cond["message"].(string); msg != "" {
			f.line += ": " + msg
			f.message = msg
		}
		out = append(out, f)
	}
	if msg, _, _ := unstructured.NestedString(o.Object, "status", "failureMessage"); msg != "" {
		out = append(out, failure{line: fmt.Sprintf("%s %s: failed: %s", gvk.Kind, name, msg)})
	}
	return out
}

func conditionTrue(conds []metav1.Condition, t string) bool {
	c := apimeta.FindStatusCondition(conds, t)
	return c != nil && c.Status == metav1.ConditionTrue
}
