package statedir_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/statedir"
)

// Opening writes nothing (a new directory stays as it was: bad input leaves no state behind); a
// directory without a mark (all of them, at layout 1) is read as layout 1; a newer layout, or a
// mark that is not one, is refused with what to do.
func TestTheLayoutIsVersioned(t *testing.T) {
	root := t.TempDir()
	fresh := filepath.Join(root, "fresh")
	if _, err := statedir.Open(fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("opening a new directory wrote it: %v", err)
	}

	old := filepath.Join(root, "old")
	if err := os.MkdirAll(filepath.Join(old, "environments", "kubeadm-capd"), 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := statedir.Open(old)
	if err != nil {
		t.Fatalf("a directory without a mark: %v", err)
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
	one := filepath.Join(root, "one")
	if err := os.MkdirAll(one, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(one, "layout"), []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := statedir.Open(one); err != nil {
		t.Errorf("layout 1: %v", err)
	}
}
