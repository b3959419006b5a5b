package kindcluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/kindcluster"
)

func TestLowInotifyLimitsAreNamedWithTheirFix(t *testing.T) {
	procSys := t.TempDir()
	dir := filepath.Join(procSys, "fs", "inotify")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(key, value string) {
		if err := os.WriteFile(filepath.Join(dir, key), []byte(value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("max_user_instances", "128")
	write("max_user_watches", "524288")
	got := kindcluster.HostWarnings(procSys)
	if len(got) != 1 || !strings.Contains(got[0], "fs.inotify.max_user_instances is 128") || !strings.Contains(got[0], "sysctl -w fs.inotify.max_user_instances=512") {
		t.Errorf("warnings: %q", got)
	}
	write("max_user_instances", "8192")
	if got := kindcluster.HostWarnings(procSys); len(got) != 0 {
		t.Errorf("high enough, yet: %q", got)
	}
	if got := kindcluster.HostWarnings(filepath.Join(procSys, "absent")); len(got) != 0 {
		t.Errorf("no such files (not Linux), yet: %q", got)
	}
}
