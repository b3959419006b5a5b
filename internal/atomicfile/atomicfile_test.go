package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWithTheModeAndLeavesNothingBehind(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "kubeconfig")
	if err := Write(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("created directory: %v %v", fi.Mode(), err)
	}
	// A file readable by all is replaced by one readable by its owner only.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after replacing a 0644 file: %v %v", fi.Mode(), err)
	}
	if data, _ := os.ReadFile(path); string(data) != "second" {
		t.Errorf("content: %q", data)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	// A write that cannot happen leaves the old file whole.
	if err := Write(filepath.Join(path, "not-a-dir"), []byte("x"), 0o600); err == nil {
		t.Error("writing below a file succeeded")
	}
	if data, _ := os.ReadFile(path); string(data) != "second" {
		t.Errorf("content after a failed write: %q", data)
	}
}
