package kindcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// HostWarnings says which of the host's inotify limits (read under procSys, /proc/sys on Linux)
// are below what a few clusters of Docker machines need. With the kernel's default of 128
// instances, the fourth cluster's nodes start containerd without its CRI plugin ("failed to
// create fsnotify watcher: too many open files") and their machines wait for ever, with nothing
// in Cluster API's conditions but "Waiting for cgroups ready".
func HostWarnings(procSys string) []string {
	// The limits kind's known issues ask for: every kind or CAPD node runs systemd, containerd and
	// a kubelet, each holding inotify instances and watches.
	minimums := []struct {
		key  string
		want int
	}{{"max_user_instances", 512}, {"max_user_watches", 524288}}
	var out []string
	for _, m := range minimums {
		path := filepath.Join(procSys, "fs", "inotify", m.key)
		data, err := os.ReadFile(path)
		if err != nil {
			continue // not Linux, or not readable: nothing to say
		}
		have, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || have >= m.want {
			continue
		}
		out = append(out, fmt.Sprintf("fs.inotify.%s is %d: machines of more than a few clusters of Docker containers may start without a container runtime (\"too many open files\"); expected %d or more: sysctl -w fs.inotify.%s=%d",
			m.key, have, m.want, m.key, m.want))
	}
	return out
}
