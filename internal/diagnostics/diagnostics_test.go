package diagnostics

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/redact"
	"cluster-init.dev/cluster-init/internal/termtext/termtexttest"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// A secret that reached the cluster in plain objects (a ConfigMap a user filled by mistake, an
// event that quotes it) is collected into the bundle, and hidden there.
func TestBundleCollectsObjectsAndHidesSecrets(t *testing.T) {
	const secret = "pl4nted-S3CRET"
	c := testenv.Start(t, "management")
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-init"}}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "by-mistake"},
		Data:       map[string]string{"proxy": "http://bob:" + secret + "@proxy:3128"},
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "cluster-init", Name: "quoting"},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "cluster-init", Name: "by-mistake"},
		Reason:         "Failed",
		Message:        "could not use " + secret,
	}
	if err := c.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}

	b := New(redact.New(secret))
	b.Add("conclusion.txt", []byte("stuck on "+secret+"\n"))
	if err := b.AddCluster(ctx, c); err != nil {
		t.Fatal(err)
	}
	path, err := b.Write(t.TempDir(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode: %v %v", fi.Mode(), err)
	}
	raw, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for name, data := range raw {
		files[name] = string(data)
	}
	for _, want := range []string{"conclusion.txt", "management/resources/ConfigMap.core.yaml", "management/resources/Event.core.yaml", "management/cluster-api-tree.txt"} {
		if _, ok := files[want]; !ok {
			t.Errorf("bundle lacks %s (has %d files)", want, len(files))
		}
	}
	if !strings.Contains(files["management/resources/ConfigMap.core.yaml"], "by-mistake") || !strings.Contains(files["management/resources/Event.core.yaml"], "could not use "+redact.Mask) {
		t.Errorf("the objects holding the secret were not collected, or not masked:\n%s", files["management/resources/Event.core.yaml"])
	}
	for name, content := range files {
		if strings.Contains(content, secret) {
			t.Errorf("%s shows the secret", name)
		}
	}
}

// The bundle's files for people (the conclusion, the Cluster API tree) quote what the clusters
// hold: they are escaped as a terminal must see them. The objects keep the data as it is, and
// one YAML cannot hold (a C1 control) is not left out.
func TestBundleSummariesEscapeWhatTheClustersHold(t *testing.T) {
	hostile := termtexttest.Hostile()
	c := testenv.Start(t, "management")
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}
	if err := c.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	paused := true
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "c1"}, Spec: clusterv1.ClusterSpec{Paused: &paused}}
	if err := c.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	cl.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Failed", Message: hostile, LastTransitionTime: metav1.Now()}}
	if err := c.Client.Status().Update(ctx, cl); err != nil {
		t.Fatal(err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "hostile"},
		InvolvedObject: corev1.ObjectReference{Kind: "Cluster", Namespace: "tenant-a", Name: "c1"}, Reason: "Failed", Message: hostile}
	if err := c.Client.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}

	b := New(redact.New())
	// The conclusion as the bootstrap writes it, of a unit the tenant's text failed.
	conclusion := progress.Conclusion{At: time.Now(), Blocking: []progress.Unit{{Name: "capi", State: readiness.Failed,
		Reason: "ReconciliationFailed", Message: hostile, Details: []string{"Cluster c1: " + hostile}}}}
	b.AddText("conclusion.txt", conclusion.String())
	if err := b.AddCluster(ctx, c); err != nil {
		t.Fatal(err)
	}
	path, err := b.Write(t.TempDir(), "test")
	if err != nil {
		t.Fatal(err)
	}
	files, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	termtexttest.Check(t, "conclusion.txt", string(files["conclusion.txt"]))
	termtexttest.Check(t, "cluster-api-tree.txt", string(files["management/cluster-api-tree.txt"]))

	var events []corev1.Event
	for _, doc := range strings.Split(string(files["management/resources/Event.core.yaml"]), "---\n") {
		var e corev1.Event
		if err := yaml.Unmarshal([]byte(doc), &e); err == nil && e.Name != "" {
			events = append(events, e)
		}
	}
	if !slices.ContainsFunc(events, func(e corev1.Event) bool { return e.Name == "hostile" && e.Message == hostile }) {
		t.Errorf("the event quoting the tenant is not in the bundle as it is:\n%s", files["management/resources/Event.core.yaml"])
	}
}
