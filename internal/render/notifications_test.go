package render_test

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/values"
)

// The management cluster's Receiver: there once the environment's secrets hold its token, for
// the platform's repository (its source and the tenants' views of it), on a node port when asked;
// the token only in a Secret. Alerts go to the values' webhook, from the platform's and the
// tenants' namespaces. Without a git source, or without a token, nothing of it.
func TestAPushReachesTheManagementClusterThroughItsReceiver(t *testing.T) {
	root := testenv.Checkout(t)
	const token = "receiver-token-6b1f0c2e"
	dir := copyEnv(t, root, "kubeadm-capd", map[string]func(string) string{
		"secrets.yaml": func(string) string {
			return "credentials:\n  notifications:\n    receiver_token: " + token + "\n"
		},
		"values.yaml": func(old string) string {
			return old + "notifications:\n  receiver:\n    node_port: 30292\n  alerts:\n    address: https://alerts.example.invalid/hook\n    tenants: true\n" +
				"workload_clusters:\n  tenants:\n    workload-clusters:\n      name_prefix: wl-\n    team-a:\n      name_prefix: a-\n      path: ./tenants/team-a\n"
		},
	})
	env, err := loadEnv(t, root, "kubeadm-capd", dir)
	if err != nil {
		t.Fatal(err)
	}
	git := map[string]any{"type": "git", "url": "http://git.test/cluster-init.git", "ref": map[string]any{"branch": "main"}}
	state := []values.Layer{managementstate.State{SelfManaged: true}.Layer()}
	res, err := render.Render(t.Context(), root, kubeVersion(t, root), render.Options{Env: env, Context: render.ContextManagement, Source: git, State: state})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]*unstructured.Unstructured{}
	for _, o := range res.Objects {
		found[o.Object.GetKind()+"/"+o.Object.GetNamespace()+"/"+o.Object.GetName()] = o.Object
		if o.Object.GetKind() != "Secret" {
			if text, _ := yamlOf(o.Object); strings.Contains(text, token) {
				t.Errorf("%s %s holds the Receiver's token", o.Object.GetKind(), o.Object.GetName())
			}
		}
	}
	receiver := found["Receiver/cluster-init/cluster-init"]
	if receiver == nil {
		t.Fatalf("no Receiver: %v", slices.Sorted(maps.Keys(found)))
	}
	text, _ := yamlOf(receiver)
	for _, want := range []string{"type: gitlab", "- Push Hook", "name: cluster-init-receiver-token", "kind: GitRepository\n    name: cluster-init\n",
		"cluster-init.dev/repository: platform"} {
		if !strings.Contains(text, want) {
			t.Errorf("the Receiver lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, token) {
		t.Error("the Receiver holds its token")
	}
	if secret := found["Secret/cluster-init/cluster-init-receiver-token"]; secret == nil {
		t.Error("no Secret of the Receiver's token")
	} else if got, _, _ := unstructured.NestedString(secret.Object, "data", "token"); got != base64.StdEncoding.EncodeToString([]byte(token)) {
		t.Error("the Receiver's Secret does not hold its token")
	}
	if service := found["Service/flux-system/webhook-receiver-node-port"]; service == nil {
		t.Error("no node port Service for the receiver")
	} else if port, _, _ := unstructured.NestedSlice(service.Object, "spec", "ports"); len(port) != 1 || port[0].(map[string]any)["nodePort"] != int64(30292) {
		t.Errorf("the receiver's node port: %v", port)
	}
	if found["NetworkPolicy/flux-system/allow-webhook-receiver-node-port"] == nil {
		t.Error("no network policy admits the node port's callers")
	}
	alert, _ := yamlOf(found["Alert/cluster-init/cluster-init-alerts"])
	for _, want := range []string{"eventSeverity: error", "namespace: team-a", "kind: HelmRelease"} {
		if !strings.Contains(alert, want) {
			t.Errorf("the Alert lacks %q:\n%s", want, alert)
		}
	}
	if provider, _ := yamlOf(found["Provider/cluster-init/cluster-init-alerts"]); !strings.Contains(provider, "address: https://alerts.example.invalid/hook") {
		t.Errorf("the alerts' provider:\n%s", provider)
	}

	// An OCI source is the bootstrap's to push: no Receiver, even with its token (a node port for it
	// is refused, cmd/bootstrap's bad input), the alerts all the same; tenants' namespaces only
	// when asked.
	res, err = render.Render(t.Context(), root, kubeVersion(t, root), render.Options{Env: env, Context: render.ContextManagement, State: state,
		Overrides: []values.Layer{values.FromMap("(test)", map[string]any{"notifications": map[string]any{
			"alerts": map[string]any{"tenants": false}, "receiver": map[string]any{"node_port": 0}}})}})
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, o := range res.Objects {
		if o.Object.GetKind() == "Receiver" || o.Object.GetName() == "webhook-receiver-node-port" {
			t.Errorf("an OCI source renders %s %s", o.Object.GetKind(), o.Object.GetName())
		}
		if o.Object.GetKind() == "Alert" {
			alerts++
			if text, _ := yamlOf(o.Object); strings.Contains(text, "team-a") || strings.Contains(text, "namespace: workload-clusters") {
				t.Errorf("the tenants' failures are sent without notifications.alerts.tenants:\n%s", text)
			}
		}
	}
	if alerts != 1 {
		t.Errorf("%d Alerts with an OCI source, want 1", alerts)
	}
	// A workload cluster's release renders the same chart (with these values, which the platform
	// does not give it): none of the notifications there.
	res, err = render.Render(t.Context(), root, kubeVersion(t, root), render.Options{Env: env, Context: render.ContextWorkload, Source: git})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		if o.Origin == render.UmbrellaChart && (o.Object.GetObjectKind().GroupVersionKind().Group == "notification.toolkit.fluxcd.io" ||
			o.Object.GetName() == "cluster-init-receiver-token" || o.Object.GetKind() == "Service" || o.Object.GetKind() == "NetworkPolicy") {
			t.Errorf("a workload cluster's release renders %s %s", o.Object.GetKind(), o.Object.GetName())
		}
	}
	// Without its token, no Receiver (and validation says so of a node port: cmd/bootstrap).
	plain := testenv.Environment(t, root, "kubeadm-capd")
	res, err = render.Render(t.Context(), root, kubeVersion(t, root), render.Options{Env: plain, Context: render.ContextManagement, Source: git, State: state})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		if o.Object.GetKind() == "Receiver" || o.Object.GetKind() == "Alert" {
			t.Errorf("no token, no alerts address: renders %s %s", o.Object.GetKind(), o.Object.GetName())
		}
	}
}

func yamlOf(o *unstructured.Unstructured) (string, error) {
	if o == nil {
		return "", nil
	}
	data, err := yaml.Marshal(o.Object)
	return string(data), err
}

// The units' releases read the credentials the release checked, from the Secret it renders with
// them alone; the environment's Secret, which a commit changes before any check, only the release
// itself reads.
func TestUnitsReadOnlyTheCredentialsTheReleaseChecked(t *testing.T) {
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capo")
	git := map[string]any{"type": "git", "url": "http://git.test/cluster-init.git", "ref": map[string]any{"branch": "main"}}
	res, err := render.Render(t.Context(), root, kubeVersion(t, root), render.Options{Env: env, Context: render.ContextManagement, Source: git,
		State: []values.Layer{managementstate.State{SelfManaged: true}.Layer()}})
	if err != nil {
		t.Fatal(err)
	}
	var checked *unstructured.Unstructured
	readers := map[string]string{}
	for _, o := range res.Objects {
		obj := o.Object
		if obj.GetKind() == "Secret" && obj.GetName() == names.CredentialsSecret && o.Origin == render.UmbrellaChart {
			checked = obj
		}
		from, _, _ := unstructured.NestedSlice(obj.Object, "spec", "valuesFrom")
		for _, f := range from {
			m := f.(map[string]any)
			if m["kind"] == "Secret" {
				readers[obj.GetName()] += fmt.Sprint(m["name"], "/", m["valuesKey"], " ")
			}
		}
	}
	if checked == nil {
		t.Fatal("no Secret of the checked credentials")
	}
	if checked.GetLabels()[names.WatchLabel] != "Enabled" {
		t.Error("a change of the checked credentials does not upgrade the releases that read them")
	}
	encoded, _, _ := unstructured.NestedString(checked.Object, "data", names.CredentialsKey)
	data, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err = yaml.Unmarshal(data, &doc); err != nil || len(doc) != 1 || doc["credentials"] == nil {
		t.Errorf("the checked credentials hold %v (%v), want credentials alone", slices.Sorted(maps.Keys(doc)), err)
	}
	want := map[string]string{
		names.Release:       names.SecretsSecret + "/" + names.SecretsKey + " ",
		"cluster":           names.CredentialsSecret + "/" + names.CredentialsKey + " ",
		"workload-clusters": names.CredentialsSecret + "/" + names.CredentialsKey + " ",
	}
	if !maps.Equal(readers, want) {
		t.Errorf("Secrets read as values: %v, want %v", readers, want)
	}
}
