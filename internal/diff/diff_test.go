package diff_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/diff"
	"cluster-init.dev/cluster-init/internal/testenv"
)

func obj(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	o := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(text), &o.Object); err != nil {
		t.Fatal(err)
	}
	return o
}

const (
	kustomization = `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: capi, namespace: default}
spec: {interval: 10m, prune: true, path: ./capi, sourceRef: {kind: GitRepository, name: repo}}
`
	live = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {replicas: "1", kept: "yes"}
`
	gone = `
apiVersion: v1
kind: ConfigMap
metadata: {name: old, namespace: default}
data: {a: "b"}
`
	// A proxy URL with a password: the cluster's (rotated since) is not among the secrets the
	// caller knows.
	proxyLive = `
apiVersion: v1
kind: ConfigMap
metadata: {name: proxy, namespace: default}
data: {url: "http://u:OLD-pr0xy-pass@proxy:3128"}
`
	secret = `
apiVersion: v1
kind: Secret
metadata: {name: credentials, namespace: default}
stringData: {password: hunter2-before}
`
)

// On a real API server: a checkout that changes one object, adds one, drops one its
// Kustomization's inventory holds and keeps one as it is; a Secret whose value changes is named
// without its values; a unit the cluster does not have yet adds everything it holds.
func TestADiffSaysWhatACommitWouldAddChangeAndRemove(t *testing.T) {
	c := testenv.Start(t, "test").Client
	ctx := t.Context()
	// Applied as the controllers apply them: kustomize-controller labels with its Kustomization,
	// Helm and helm-controller mark a release's objects.
	byUnit := map[string]string{"kustomize.toolkit.fluxcd.io/name": "capi", "kustomize.toolkit.fluxcd.io/namespace": "default"}
	for _, text := range []string{kustomization, live, gone, secret, proxyLive, "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n"} {
		o := obj(t, text)
		if o.GetKind() != "Kustomization" {
			o.SetLabels(byUnit)
		}
		if err := c.Patch(ctx, o, client.Apply, client.FieldOwner("kustomize-controller"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	}
	released := obj(t, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: released, namespace: default}\n")
	released.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "Helm", "helm.toolkit.fluxcd.io/name": "cluster", "helm.toolkit.fluxcd.io/namespace": "default"})
	released.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "cluster", "meta.helm.sh/release-namespace": "default"})
	if err := c.Patch(ctx, released, client.Apply, client.FieldOwner("helm-controller"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	hr := obj(t, "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: cluster, namespace: default}\nspec: {interval: 10m, chart: {spec: {chart: ./c, sourceRef: {kind: GitRepository, name: repo}}}}\n")
	if err := c.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	ks := obj(t, kustomization)
	if err := c.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(ks.Object, []any{
		map[string]any{"id": "default_settings__ConfigMap", "v": "v1"},
		map[string]any{"id": "default_old__ConfigMap", "v": "v1"},
		map[string]any{"id": "default_credentials__Secret", "v": "v1"},
		map[string]any{"id": "default_proxy__ConfigMap", "v": "v1"},
	}, "status", "inventory", "entries"); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(ctx, ks); err != nil {
		t.Fatal(err)
	}

	changed := obj(t, strings.Replace(live, `replicas: "1"`, `replicas: "2"`, 1))
	added := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new, namespace: default}\ndata: {x: z}\n")
	rotated := obj(t, strings.Replace(secret, "hunter2-before", "hunter2-after", 1))
	unchanged := obj(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n")
	newKind := obj(t, "apiVersion: example.invalid/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\n")
	newNamespace := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: arrives-with-the-commit}\n")
	refused := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Not_A_Name, namespace: default}\n")
	report, err := diff.Compute(ctx, c, []diff.Owner{
		{Kind: diff.KindKustomization, Namespace: "default", Name: "capi", Label: "unit capi", Desired: []*unstructured.Unstructured{changed, added, rotated, unchanged, newKind, newNamespace, refused,
			obj(t, strings.Replace(proxyLive, "OLD-pr0xy-pass", "NEW-pr0xy-pass", 1))}},
		{Kind: diff.KindHelmRelease, Namespace: "default", Name: "later", Label: "release later", Desired: []*unstructured.Unstructured{
			obj(t, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: later, namespace: default}\n")}},
		{Kind: diff.KindHelmRelease, Namespace: "default", Name: "cluster", Label: "unit cluster", Desired: []*unstructured.Unstructured{
			obj(t, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: released, namespace: default}\n")}},
	}, func(s string) string { return strings.ReplaceAll(s, "NEW-pr0xy-pass", "[hidden]") })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range report.Changes {
		line := ch.Owner + ": " + string(ch.Action) + " " + ch.Object + " " + strings.Join(ch.Fields, "; ")
		if i := strings.Index(line, " is invalid"); i > 0 {
			line = line[:i+len(" is invalid")] // the API server's reasons follow
		}
		got = append(got, line)
	}
	want := []string{
		"release later: added ServiceAccount default/later ",
		"unit capi: added ConfigMap arrives-with-the-commit/c ",
		"unit capi: added ConfigMap default/new ",
		"unit capi: added Widget default/w ",
		"unit capi: changed ConfigMap default/proxy data.url: \"http://***@proxy:3128\" -> \"http://***@proxy:3128\"",
		"unit capi: changed ConfigMap default/settings data.replicas: \"1\" -> \"2\"",
		"unit capi: changed Secret default/credentials data.password: replace",
		"unit capi: refused ConfigMap default/Not_A_Name ConfigMap \"Not_A_Name\" is invalid",
		"unit capi: removed ConfigMap default/old ",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if report.Unchanged != 2 || !slices.Equal(report.NotApplied, []string{"release later"}) {
		t.Errorf("unchanged %d, not applied %v", report.Unchanged, report.NotApplied)
	}
	for _, ch := range report.Changes {
		for _, f := range ch.Fields {
			if strings.Contains(f, "hunter2") || strings.Contains(f, "aHVudGVy") || strings.Contains(f, "pr0xy-pass") {
				t.Errorf("a Secret's value shown: %s", f)
			}
		}
	}

	// Nothing was changed: the dry runs left the cluster as it was.
	cm := obj(t, live)
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(cm.Object, "data", "replicas"); v != "1" {
		t.Errorf("the diff changed the cluster: replicas %s", v)
	}
}
