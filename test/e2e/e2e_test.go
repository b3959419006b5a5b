//go:build e2e

// Package e2e runs the real thing on the offline test bed: `bootstrap kubeadm-capd` from a clean
// state through the pivot, day 2 with `bootstrap apply`, GitOps, the adoption of an existing cluster
// (bootstrap --adopt), and the fault cases. Start the test bed
// first (tools/testbed/up), then: go test -tags e2e -timeout 3h -v ./test/e2e
//
// Each test reports its figures (wall time per phase and in total, peak memory of the bootstrap
// process) with t.Logf.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"cluster-init.dev/cluster-init/internal/checkout"
	"cluster-init.dev/cluster-init/internal/statedir"
)

var (
	repo      string
	binary    string
	state     statedir.Dir
	testbedVs string
	// testbedSet names the images the test bed has built (tools/testbed/build-images): kubeadm-capd
	// first, then all.
	testbedSet string
	// testbedImages are the images the test bed has built ($CACHE/images.txt).
	testbedImages []string
)

func TestMain(m *testing.M) {
	root, err := checkout.Root(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	repo = root
	if err := loadUpgradePins(root); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cache := os.Getenv("CLUSTER_INIT_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "cluster-init")
	}
	testbedVs = filepath.Join(cache, "testbed-values.yaml")
	// The state of the test bed's bootstraps, shared with tools/testbed/up.
	state = statedir.Dir{Path: os.Getenv("CLUSTER_INIT_STATE_DIR")}
	if state.Path == "" {
		state.Path = filepath.Join(cache, "testbed-state")
	}
	if _, err := os.Stat(testbedVs); err != nil {
		fmt.Fprintf(os.Stderr, "the test bed is not up (no %s): run tools/testbed/up first\n", testbedVs)
		os.Exit(1)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "testbed-set")); err == nil {
		testbedSet = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile(filepath.Join(cache, "images.txt")); err == nil {
		testbedImages = strings.Fields(string(b))
	}
	dir, err := os.MkdirTemp("", "cluster-init-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "bootstrap")
	// The CLI, and the image its Jobs and the placement controller run (same code), built from
	// this checkout; pushed to the test bed's registry, where the clusters made from kind pull it.
	push := `tools/testbed/registry push "$(sed -n 's/^cluster_init_image: *//p' charts/cluster-init/values.yaml)"`
	for _, args := range [][]string{{"go", "build", "-o", binary, "./cmd/bootstrap"}, {"tools/image/build"}, {"bash", "-c", push}} {
		build := exec.Command(args[0], args[1:]...)
		build.Dir, build.Stdout, build.Stderr = repo, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "%v: %v\n", args, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireTestbedImage fails a test that runs ref while the test bed has not built it (a test bed
// built before ref joined its set): without it the test would wait on pods that cannot pull.
func requireTestbedImage(t *testing.T, ref string) {
	t.Helper()
	if !slices.Contains(testbedImages, ref) {
		t.Fatalf("the test bed has not built %s (not in its images.txt): run tools/testbed/up again", ref)
	}
}

// requireEveryTestbedImage fails a test that runs images of the test bed's second set (providers,
// the previous Kubernetes minor and Cluster API set) while only
// the kubeadm-capd set is built: without it the test would wait on pods that cannot pull.
func requireEveryTestbedImage(t *testing.T) {
	t.Helper()
	if testbedSet != "all" {
		t.Fatalf("the test bed has built the kubeadm-capd images only (set %q): this test runs the others too; "+
			"tools/testbed/up builds them after the kubeadm-capd test bed is usable", testbedSet)
	}
}

// run is one run of the bootstrap binary.
type run struct {
	args   []string
	output bytes.Buffer
	err    error
	wall   time.Duration
	// cpu is the processor time the command used (user and system): unlike its wall time, it
	// does not grow with the load of the machine it shares.
	cpu      time.Duration
	maxRSSKB int64
	phases   map[string]time.Duration
}

// bootstrap runs the CLI with the test bed values; onLine, if set, sees every output line and can
// kill the process by returning true.
func bootstrap(t *testing.T, ctx context.Context, onLine func(string) bool, args ...string) *run {
	t.Helper()
	r := &run{args: args, phases: map[string]time.Duration{}}
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CLUSTER_INIT_STATE_DIR="+state.Path)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopWatching := watchPeakRSS(cmd.Process.Pid, &r.maxRSSKB)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		killed := false
		for sc.Scan() {
			line := sc.Text()
			r.output.WriteString(line + "\n")
			t.Log(line)
			if onLine != nil && !killed && onLine(line) {
				killed = true
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
		}
	}()
	r.err = cmd.Wait()
	stopWatching()
	pw.Close()
	wg.Wait()
	r.wall = time.Since(start)
	if cmd.ProcessState != nil {
		r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	phase := regexp.MustCompile(`^\s{2}(\S.*?)\s{2,}(\d+(?:h\d+m)?(?:\d+m)?\d+s|\d+m\d+s|\d+s)$`)
	inPhases := false
	for _, l := range strings.Split(r.output.String(), "\n") {
		if l == "phases:" {
			inPhases = true
			continue
		}
		if m := phase.FindStringSubmatch(l); inPhases && m != nil {
			d, _ := time.ParseDuration(m[2])
			r.phases[strings.TrimSpace(m[1])] = d
		}
	}
	return r
}

func (r *run) report(t *testing.T, name string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s: wall %s, peak RSS of bootstrap %.0f MiB;", name, r.wall.Round(time.Second), float64(r.maxRSSKB)/1024)
	for _, p := range []string{"validate", "state", "bootstrap cluster", "flux", "source", "environment", "units", "providers", "backup", "restore", "scale", "delete", "export", "finish", "management cluster", "machines", "total"} {
		if d, ok := r.phases[p]; ok {
			fmt.Fprintf(&b, " %s %s;", p, d)
		}
	}
	t.Log(b.String())
}

// kubectl returns what kubectl prints on stdout (its warnings go to stderr and are not counted).
func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s%s", args, err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// impersonating is a kubeconfig of the cluster of kc acting as user, a member of group: a tenant's
// people with their own identity.
func impersonating(t *testing.T, kc, user, group string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range cfg.AuthInfos {
		u.Impersonate, u.ImpersonateGroups = user, []string{group}
	}
	people := filepath.Join(t.TempDir(), group+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, people); err != nil {
		t.Fatal(err)
	}
	return people
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// cleanup removes what an environment's bootstrap created.
func cleanup(t *testing.T, env string) {
	t.Helper()
	r := bootstrap(t, context.Background(), nil, "cleanup", env)
	if r.err != nil {
		t.Errorf("cleanup %s: %v", env, r.err)
	}
	// The cluster is gone with its containers: so is its kubeconfig, or a new bootstrap of the
	// environment would be refused as already done.
	if _, err := os.Stat(state.Environment(env).ManagementKubeconfig()); err == nil {
		t.Errorf("cleanup %s left the management kubeconfig", env)
	}
	os.RemoveAll(state.Environments())
}

func kindClusters(t *testing.T) []string {
	t.Helper()
	out := docker(t, "ps", "-a", "--filter", "label=io.x-k8s.kind.role", "--format", `{{.Label "io.x-k8s.kind.cluster"}}`)
	seen := map[string]bool{}
	var names []string
	for _, n := range strings.Fields(out) {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names
}

// watchPeakRSS follows the peak resident set of a process (VmHWM, its own address space's high
// water mark) until stopped. The rusage of a waited child would not do: Go starts children with
// vfork, so the kernel counts the test process's own peak into the child's ru_maxrss.
func watchPeakRSS(pid int, peakKB *int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for _, line := range strings.Split(string(data), "\n") {
					if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						var kb int64
						if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb); err == nil && kb > *peakKB {
							*peakKB = kb
						}
					}
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
