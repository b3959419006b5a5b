package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/diff"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/redact"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// bootstrap diff against a real API server: an empty cluster gets everything added; once the
// checkout's objects are applied as Flux would apply them (but the webhook configurations: no
// controller serves them here), nothing differs; a commit that asks for two workers changes the
// cluster unit's HelmRelease and, through it, the MachineDeployment; and a diff changes nothing.
func TestDiffSaysWhatACommitWouldChangeInTheManagementCluster(t *testing.T) {
	c := testenv.Start(t, "mgmt")
	kubeconfig := kubeconfigFile(t, c)
	diffOf := func(env string) diff.Report {
		t.Helper()
		out, err := run(t, "diff", env, "--kubeconfig", kubeconfig, "-o", "json")
		if err != nil {
			t.Fatalf("diff %s: %v\n%s", env, err, out)
		}
		var r diff.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("diff -o json: %v\n%s", err, out)
		}
		return r
	}

	empty := diffOf("kubeadm-capd")
	if len(empty.Changes) == 0 || !slices.Contains(empty.NotApplied, "release cluster-init") || !slices.Contains(empty.NotApplied, "unit capi") {
		t.Fatalf("an empty cluster: %d changes, %d unchanged, not applied %v", len(empty.Changes), empty.Unchanged, empty.NotApplied)
	}
	for _, ch := range empty.Changes {
		// The test cluster starts with the CRDs of Cluster API, without their conversion webhooks.
		if ch.Action != diff.Added && !(ch.Action == diff.Changed && strings.HasPrefix(ch.Object, "CustomResourceDefinition ")) {
			t.Errorf("an empty cluster: %s %s (%s): %v", ch.Action, ch.Object, ch.Owner, ch.Fields)
		}
	}

	// Apply what the checkout has each Flux object apply, as that controller: CRDs first.
	g := &globals{redactor: redact.New()}
	w, _, _, err := g.openClusters("kubeadm-capd", kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	owners, _, err := diff.Owners(t.Context(), c, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, o := range owners {
		for _, obj := range o.Desired {
			for k := range obj.GetAnnotations() {
				if k == names.OriginAnnotation || k == names.UnitAnnotation {
					t.Fatalf("%s: %s %s carries the render's annotation %s, which Flux does not apply", o.Label, obj.GetKind(), obj.GetName(), k)
				}
			}
		}
	}
	apply := func(first bool) {
		for _, o := range owners {
			for _, obj := range o.Desired {
				isFirst := obj.GetKind() == "CustomResourceDefinition" || obj.GetKind() == "Namespace"
				if isFirst != first || webhook(obj) {
					continue // no controller serves a webhook here
				}
				manager := map[string]string{diff.KindKustomization: "kustomize-controller", diff.KindHelmRelease: "helm-controller"}[o.Kind]
				// What the controller adds (Flux's and Helm's documented labels and annotations).
				applied := obj.DeepCopy()
				labels, annotations := applied.GetLabels(), applied.GetAnnotations()
				if labels == nil {
					labels = map[string]string{}
				}
				if annotations == nil {
					annotations = map[string]string{}
				}
				if o.Kind == diff.KindKustomization {
					labels["kustomize.toolkit.fluxcd.io/name"], labels["kustomize.toolkit.fluxcd.io/namespace"] = o.Name, o.Namespace
				} else {
					labels["app.kubernetes.io/managed-by"] = "Helm"
					labels["helm.toolkit.fluxcd.io/name"], labels["helm.toolkit.fluxcd.io/namespace"] = o.Name, o.Namespace
					annotations["meta.helm.sh/release-name"], annotations["meta.helm.sh/release-namespace"] = o.Name, o.Namespace
					applied.SetAnnotations(annotations)
				}
				applied.SetLabels(labels)
				if err := c.Client.Patch(ctx, applied, client.Apply, client.FieldOwner(manager), client.ForceOwnership); err != nil {
					t.Fatalf("apply %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
				}
			}
		}
	}
	apply(true)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &apiextensionsv1.CustomResourceDefinitionList{}
		if err := c.Client.List(ctx, list); err != nil {
			return false, nil
		}
		for _, crd := range list.Items {
			established := false
			for _, cond := range crd.Status.Conditions {
				established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	apply(false)
	// What the controllers record of what they applied.
	for _, o := range owners {
		flux := &unstructured.Unstructured{}
		flux.SetAPIVersion(map[string]string{diff.KindKustomization: "kustomize.toolkit.fluxcd.io/v1", diff.KindHelmRelease: "helm.toolkit.fluxcd.io/v2"}[o.Kind])
		flux.SetKind(o.Kind)
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, flux); err != nil {
			t.Fatalf("%s: %v", o.Label, err)
		}
		var entries []any
		for _, obj := range o.Desired {
			gvk := obj.GroupVersionKind()
			entries = append(entries, map[string]any{"id": obj.GetNamespace() + "_" + obj.GetName() + "_" + gvk.Group + "_" + gvk.Kind, "v": gvk.Version})
		}
		if err := unstructured.SetNestedSlice(flux.Object, entries, "status", "inventory", "entries"); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Status().Update(ctx, flux); err != nil {
			t.Fatalf("%s: %v", o.Label, err)
		}
	}

	same := diffOf("kubeadm-capd")
	same.Changes = slices.DeleteFunc(same.Changes, func(ch diff.Change) bool {
		return ch.Action == diff.Added && strings.Contains(ch.Object, "WebhookConfiguration ")
	})
	if len(same.Changes) != 0 || len(same.NotApplied) != 0 || same.Unchanged == 0 {
		for _, ch := range same.Changes {
			t.Logf("%s: %s %s %v", ch.Owner, ch.Action, ch.Object, ch.Fields)
		}
		t.Fatalf("the checkout as applied: %d changes, %d unchanged, not applied %v", len(same.Changes), same.Unchanged, same.NotApplied)
	}

	twoWorkers := copyEnvironment(t, "kubeadm-capd", func(file string, data []byte) []byte {
		if file == "values.yaml" {
			out := strings.Replace(string(data), "  workers:\n    replicas: 1\n", "  workers:\n    replicas: 2\n", 1)
			if out == string(data) {
				t.Fatal("no workers: replicas: 1 in the environment's values")
			}
			return []byte(out)
		}
		return data
	})
	changed := diffOf(twoWorkers)
	var got []string
	for _, ch := range changed.Changes {
		got = append(got, string(ch.Action)+" "+ch.Object+": "+strings.Join(ch.Fields, "; "))
	}
	if !slices.ContainsFunc(got, func(s string) bool {
		return strings.HasPrefix(s, "changed MachineDeployment cluster-init/") && strings.Contains(s, "spec.replicas: 1 -> 2")
	}) || !slices.ContainsFunc(got, func(s string) bool {
		return strings.HasPrefix(s, "changed HelmRelease cluster-init/cluster: ") && strings.Contains(s, "spec.values.cluster.workers.replicas: 1 -> 2")
	}) {
		t.Errorf("two workers:\n%s", strings.Join(got, "\n"))
	}
	t.Logf("two workers: %d changes, %d unchanged:\n%s", len(changed.Changes), changed.Unchanged, strings.Join(got, "\n"))

	if again := diffOf("kubeadm-capd"); len(again.Changes) != len(same.Changes)+webhooks(owners) {
		t.Errorf("a diff changed the cluster: %d changes afterwards", len(again.Changes))
	}

	// The release in the cluster reads the source bootstrap recorded there, not the checkout's
	// default: the diff renders with it too.
	src := &unstructured.Unstructured{}
	src.SetAPIVersion("v1")
	src.SetKind("ConfigMap")
	src.SetNamespace(names.Namespace)
	src.SetName(names.SourceConfigMap)
	if err := unstructured.SetNestedStringMap(src.Object, map[string]string{names.ValuesKey: "source:\n  type: oci\n  url: oci://elsewhere.invalid:5000/cluster-init\n"}, "data"); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	moved := diffOf("kubeadm-capd")
	var urls []string
	for _, ch := range moved.Changes {
		for _, f := range ch.Fields {
			if strings.Contains(f, "oci://elsewhere.invalid:5000/cluster-init") {
				urls = append(urls, ch.Object+": "+f)
			}
		}
	}
	if len(urls) == 0 {
		t.Errorf("the cluster's recorded source is not what the diff renders with: %d changes", len(moved.Changes))
	}
	t.Logf("with the cluster's source: %d changes, e.g. %v", len(moved.Changes), urls[:min(len(urls), 2)])
}

func webhook(obj *unstructured.Unstructured) bool {
	return strings.HasSuffix(obj.GetKind(), "WebhookConfiguration")
}

func webhooks(owners []diff.Owner) int {
	n := 0
	for _, o := range owners {
		n += len(slices.DeleteFunc(slices.Clone(o.Desired), func(obj *unstructured.Unstructured) bool { return !webhook(obj) }))
	}
	return n
}
