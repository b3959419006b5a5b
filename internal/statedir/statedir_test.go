package statedir_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/statedir"
)

// A new directory is marked with this build's layout; one without a mark (written before the
// layout was versioned) is read as layout 1; a newer layout, or a mark that is not one, is
// refused with what to do.
func TestTheLayoutIsVersioned(t *testing.T) {
	root := t.TempDir()
	fresh := filepath.Join(root, "fresh")
	if _, err := statedir.Open(fresh); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(fresh, "layout")); err != nil || strings.TrimSpace(string(data)) != "1" {
		t.Errorf("layout of a new directory: %q, %v", data, err)
	}

	old := filepath.Join(root, "old")
	if err := os.MkdirAll(filepath.Join(old, "environments", "kubeadm-capd"), 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := statedir.Open(old)
	if err != nil {
		t.Fatalf("a directory of before the layout was versioned: %v", err)
	}
	if got := d.Environment("kubeadm-capd").ManagementKubeconfig(); got != filepath.Join(old, "environments", "kubeadm-capd", "management.kubeconfig") {
		t.Errorf("the management kubeconfig moved: %s", got)
	}

	for content, want := range map[string]string{
		"2\n":   "is of layout 2, written by a newer cluster-init",
		"two\n": `expected a layout version (an integer), got "two"`,
	} {
		dir := filepath.Join(root, strings.TrimSpace(content))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "layout"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := statedir.Open(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("layout %q: %v, want %q", content, err, want)
		}
	}
}
