package diagnostics

import (
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cluster-init.dev/cluster-init/internal/redact"
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
