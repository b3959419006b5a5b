//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// repository is a working copy of the repository on the test bed's git server: the checkout,
// with the environment set to read from it and its secrets encrypted.
type repository struct {
	// env is the environment the repository's management cluster is made of.
	env           string
	dir           string
	remote        string // with the credentials: never logged
	key           string // the age key file
	receiverToken string // the management cluster's Receiver's (credentials.notifications.receiver_token)
}

func gitServer(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo, "tools/testbed/git-server"), args...)
	out, err := cmd.Output()
	if err != nil {
		// Its arguments may hold a webhook's URL, whose path derives from a token.
		t.Fatalf("git-server %s: %v", args[0], err)
	}
	return strings.TrimSpace(string(out))
}

func (r *repository) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir, "-c", "user.name=e2e", "-c", "user.email=e2e@cluster-init.invalid"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		// The remote URL holds the token: say what failed without it.
		t.Fatalf("git %s: %v", args[0], err)
	}
	return strings.TrimSpace(string(out))
}

// commit commits every change of the working copy and pushes it; it returns when the push is done.
func (r *repository) commit(t *testing.T, message string) time.Time {
	t.Helper()
	r.git(t, "add", "-A")
	r.git(t, "commit", "-q", "-m", message)
	r.git(t, "push", "-q", r.remote, "HEAD:refs/heads/main")
	return time.Now()
}

// replace makes the working copy's history the repository's (the test owns the repository).
func (r *repository) replace(t *testing.T, message string) {
	t.Helper()
	r.git(t, "add", "-A")
	r.git(t, "commit", "-q", "-m", message)
	r.git(t, "push", "-q", "--force", r.remote, "HEAD:refs/heads/main")
}

func (r *repository) write(t *testing.T, rel, content string) {
	t.Helper()
	path := filepath.Join(r.dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSecrets writes the environment's secrets (the git server's credentials, the Receiver's
// token, then more credentials given as YAML lines indented under credentials:) and encrypts them
// as a platform team commits them.
func (r *repository) writeSecrets(t *testing.T, more string) {
	t.Helper()
	lines := strings.Split(gitServer(t, "credentials"), "\n")
	token := strings.TrimSpace(readFile(t, lines[1]))
	r.write(t, "environment-values/"+r.env+"/secrets.yaml",
		"credentials:\n  git:\n    username: "+lines[0]+"\n    password: "+token+"\n"+
			"  notifications:\n    receiver_token: "+r.receiverToken+"\n"+more)
	bootstrapOK(t, "secrets", "encrypt", r.env, "--repo", r.dir, "--age-key-file", r.key)
	if data := readFile(t, filepath.Join(r.dir, "environment-values", r.env, "secrets.yaml")); strings.Contains(data, token) || strings.Contains(data, r.receiverToken) {
		t.Fatal("a token is in the committed secrets file")
	}
}

// newRepository copies the checkout into a new working copy whose environment reads its values
// and (encrypted) secrets from the git server, and pushes it as branch main.
// prepare, if given, changes the working copy before it is pushed (the platform's values).
func newRepository(t *testing.T, prepare ...func(r *repository)) *repository {
	t.Helper()
	return newRepositoryOf(t, env, prepare...)
}

// newRepositoryOf is newRepository for the environment environment-values/envName.
func newRepositoryOf(t *testing.T, envName string, prepare ...func(r *repository)) *repository {
	t.Helper()
	gitServer(t, "start")
	url := gitServer(t, "url")
	lines := strings.Split(gitServer(t, "credentials"), "\n")
	token, err := os.ReadFile(lines[1])
	if err != nil {
		t.Fatal(err)
	}
	r := &repository{env: envName, dir: t.TempDir(), key: filepath.Join(t.TempDir(), "age.agekey"), receiverToken: newReceiverToken(t)}
	r.remote = strings.Replace(url, "http://", "http://"+lines[0]+":"+strings.TrimSpace(string(token))+"@", 1)

	list := exec.Command("git", "-C", repo, "ls-files", "-co", "--exclude-standard", "-z")
	files, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			continue // deleted in the working tree
		}
		r.write(t, f, string(data))
	}
	r.git(t, "init", "-q", "-b", "main")

	// The environment names its git source and serves its Receiver on a node port; its secrets
	// carry the git credentials and the Receiver's token, encrypted.
	values, err := os.ReadFile(filepath.Join(r.dir, "environment-values", r.env, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r.write(t, "environment-values/"+r.env+"/values.yaml", string(values)+"source:\n  type: git\n  url: "+url+"\n  ref:\n    branch: main\n"+
		"notifications:\n  receiver:\n    node_port: "+receiverNodePort+"\n")
	if out := bootstrapOK(t, "secrets", "keygen", "--out", r.key); !strings.Contains(out, "public key: age1") {
		t.Fatalf("keygen: %s", out)
	}
	r.writeSecrets(t, "")
	for _, p := range prepare {
		p(r)
	}
	r.replace(t, "the checkout, reading its environment from git")
	return r
}

// bootstrapFromGit bootstraps the environment from a new repository of the git server, from a
// clean state, and cleans up after the test. The git server then announces every push to the
// management cluster's Receiver, as a GitLab project's webhook would.
func bootstrapFromGit(t *testing.T, ctx context.Context, prepare ...func(r *repository)) (*repository, *run) {
	t.Helper()
	cleanup(t, env)
	t.Cleanup(func() { cleanup(t, env) })
	r := newRepository(t, prepare...)
	run := bootstrap(t, ctx, nil, env, "--repo", r.dir, "--age-key-file", r.key, "--values", testbedVs, "--output", "plain")
	run.report(t, "bootstrap "+env+" --source git")
	if run.err != nil {
		t.Fatalf("bootstrap: %v", run.err)
	}
	if strings.Contains(run.output.String(), r.receiverToken) {
		t.Error("the Receiver's token was printed")
	}
	connectReceiver(t, r, receiverURL(t, managementKubeconfig(), receiverNodePort))
	return r, run
}

func bootstrapOK(t *testing.T, args ...string) string {
	t.Helper()
	r := bootstrap(t, context.Background(), nil, args...)
	if r.err != nil {
		t.Fatalf("bootstrap %v: %v", args[:2], r.err)
	}
	return r.output.String()
}

// The management cluster lives from git: bootstrapped from the git server, then changed by plain
// commits only: the management cluster's own workers, a workload cluster added, scaled, removed.
func TestGitOps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Minute)
	defer cancel()
	r, run := bootstrapFromGit(t, ctx)
	if strings.Contains(run.output.String(), gitToken(r)) {
		t.Error("the git token was printed")
	}
	kc := managementKubeconfig()
	if got := kubectl(t, kc, "-n", "cluster-init", "get", "gitrepository", "cluster-init", "-o", "jsonpath={.spec.url} {.status.conditions[?(@.type==\"Ready\")].status}"); got != gitServer(t, "url")+" True" {
		t.Fatalf("the management cluster's source: %q", got)
	}
	machinesBefore := machineIDs(t, kc, "cluster-init")

	// 1. The management cluster's workers, 1 -> 2, by a commit.
	values := readFile(t, filepath.Join(r.dir, "environment-values", env, "values.yaml"))
	r.write(t, "environment-values/"+env+"/values.yaml", strings.Replace(values, "  workers:\n    replicas: 1\n", "  workers:\n    replicas: 2\n", 1))
	// What the commit will change in the running cluster, as a merge request's pipeline shows it
	// (bootstrap diff: dry runs through the cluster's own admission, Cluster API's webhooks included).
	started := time.Now()
	d := bootstrapOK(t, "diff", env, "--repo", r.dir, "--age-key-file", r.key)
	if !regexp.MustCompile(`(?m)^  ~ MachineDeployment cluster-init/management-workers \(changed\)\n(      .*\n)*?      spec\.replicas: 1 -> 2$`).MatchString(d) {
		t.Errorf("bootstrap diff does not show the workers' change:\n%s", d)
	}
	if strings.Contains(d, gitToken(r)) || strings.Contains(d, r.receiverToken) {
		t.Error("bootstrap diff printed a token")
	}
	t.Logf("bootstrap diff of the commit against the management cluster: %s, %s", time.Since(started).Round(100*time.Millisecond), strings.SplitN(d, "\n", 2)[0])
	asked := requestedAt(kc)
	pushed := r.commit(t, "management: two workers")
	// The git server announced the push: the Receiver asked the source for it, which fetched it
	// at once, not at its next poll (source.interval, 1m).
	fetched := waitForSource(t, kc, r.git(t, "rev-parse", "HEAD"), 3*time.Minute)
	if requestedAt(kc) == asked {
		t.Errorf("the source fetched the push after %s without the Receiver's request: the webhook did not reach it", fetched.Round(time.Second))
	}
	t.Logf("push -> the management cluster's source at the commit, by the Receiver: %s", fetched.Round(100*time.Millisecond))
	waitFor(t, 15*time.Minute, "a third machine of the management cluster, running", func() bool {
		return runningMachines(t, kc, "cluster-init", "management") == 3
	})
	t.Logf("push -> management cluster with 2 workers (Receiver): %s", time.Since(pushed).Round(time.Second))

	// 2. A workload cluster, by a commit.
	wl1 := readFile(t, filepath.Join(repo, "environment-values/workload-clusters/example/cluster.yaml"))
	r.write(t, "clusters/management/workload-clusters/wl1/cluster.yaml", wl1)
	pushed = r.commit(t, "workload cluster wl1")
	waitFor(t, 20*time.Minute, "workload cluster wl1 Available", func() bool {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "cluster", "wl1", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`) == "True"
	})
	t.Logf("push -> workload cluster wl1 Available (Receiver): %s", time.Since(pushed).Round(time.Second))
	logTimeline(t, kc, pushed, "workload-clusters", [][2]string{
		{"helmrelease", "wl1"}, {"kustomization", "wl1-cluster"}, {"helmrelease", "wl1-cluster"}, {"cluster", "wl1"},
	}, "wl1")
	wlkc := filepath.Join(t.TempDir(), "wl1.kubeconfig")
	if err := os.WriteFile(wlkc, []byte(kubectl(t, kc, "-n", "workload-clusters", "get", "secret", "wl1-kubeconfig", "-o", "jsonpath={.data.value}")), 0o600); err != nil {
		t.Fatal(err)
	}
	decodeBase64File(t, wlkc)
	waitFor(t, 10*time.Minute, "the CNI and metrics-server of wl1 Ready", func() bool {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "kustomization", "wl1-cni", "wl1-metrics-server", "-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`) == "True True"
	})
	t.Logf("push -> CNI and metrics-server Ready in wl1 (Receiver): %s", time.Since(pushed).Round(time.Second))
	if got := kubectl(t, wlkc, "-n", "kube-system", "get", "deployment", "metrics-server", "-o", "jsonpath={.status.availableReplicas}"); got != "1" {
		t.Errorf("metrics-server in wl1: %q available", got)
	}
	namespaces := strings.Fields(kubectl(t, wlkc, "get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}"))
	for _, forbidden := range []string{"cert-manager", "capi-system", "capd-system", "capi-kubeadm-bootstrap-system", "capi-kubeadm-control-plane-system", "flux-system", "cluster-init"} {
		if slices.Contains(namespaces, forbidden) {
			t.Errorf("workload cluster wl1 runs namespace %s", forbidden)
		}
	}

	// 3. Scaled by a commit: a worker more, the control plane untouched. The Receiver cannot be
	// reached this time (the webhook calls a port nothing serves): the source's poll finds it.
	cp := kubectl(t, kc, "-n", "workload-clusters", "get", "machines", "-l", "cluster.x-k8s.io/control-plane", "-o", "jsonpath={.items[*].spec.providerID}")
	connectReceiver(t, r, receiverURL(t, kc, "30293"))
	r.write(t, "clusters/management/workload-clusters/wl1/cluster.yaml", strings.Replace(wl1, "      workers:\n        replicas: 1\n", "      workers:\n        replicas: 2\n", 1))
	asked = requestedAt(kc)
	pushed = r.commit(t, "wl1: two workers")
	fetched = waitForSource(t, kc, r.git(t, "rev-parse", "HEAD"), 5*time.Minute)
	if requestedAt(kc) != asked {
		t.Error("the source was asked for the push although the Receiver could not be reached")
	}
	t.Logf("push -> the management cluster's source at the commit, by polling (Receiver unreachable): %s", fetched.Round(100*time.Millisecond))
	waitFor(t, 15*time.Minute, "wl1 with 3 running machines", func() bool {
		return runningMachines(t, kc, "workload-clusters", "wl1") == 3
	})
	t.Logf("push -> wl1 with 2 workers (by polling, Receiver unreachable): %s", time.Since(pushed).Round(time.Second))
	connectReceiver(t, r, receiverURL(t, kc, receiverNodePort))
	if now := kubectl(t, kc, "-n", "workload-clusters", "get", "machines", "-l", "cluster.x-k8s.io/control-plane", "-o", "jsonpath={.items[*].spec.providerID}"); now != cp {
		t.Errorf("the control plane of wl1 was replaced: %s -> %s", cp, now)
	}

	// 4. The tenant: HelmReleases of its namespace, nothing else; its clusters are built as the
	// namespace's builder account.
	for _, q := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "helmreleases.helm.toolkit.fluxcd.io", "-n", "workload-clusters"}, "yes"},
		{[]string{"create", "clusters.cluster.x-k8s.io", "-n", "workload-clusters"}, "no"},
		{[]string{"get", "secrets", "-n", "workload-clusters"}, "no"},
		{[]string{"get", "secrets", "-n", "cluster-init"}, "no"},
		{[]string{"create", "pods", "-n", "capd-system"}, "no"},
		{[]string{"get", "deployments", "-n", "capi-system"}, "no"},
	} {
		args := append([]string{"auth", "can-i"}, q.args...)
		args = append(args, "--as", "system:serviceaccount:workload-clusters:tenant")
		if got := kubectlQuiet(kc, args...); got != q.want {
			t.Errorf("kubectl auth can-i %v as the tenant: %q, want %q", q.args, got, q.want)
		}
	}
	status := bootstrapOK(t, "status", env, "--repo", r.dir, "--age-key-file", r.key)
	for _, want := range []string{"workload clusters:", "tenant workload-clusters", "wl1: Provisioned"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}

	// 5. A broken management commit: a negative worker count. The release refuses it (its
	// schema) and keeps its units as they were; status names the release, Helm's reason and the
	// commit (the chart's version carries it).
	valuesFile := "environment-values/" + env + "/values.yaml"
	good := readFile(t, filepath.Join(r.dir, valuesFile))
	bad := strings.Replace(good, "  workers:\n    replicas: 2\n", "  workers:\n    replicas: -1\n", 1)
	if bad == good {
		t.Fatal("no worker count to break in the values")
	}
	r.write(t, valuesFile, bad)
	pushed = r.commit(t, "management: a negative worker count")
	broken := r.git(t, "rev-parse", "HEAD")[:12]
	waitFor(t, 5*time.Minute, "the release to refuse the broken commit", func() bool {
		return releaseAt(kc) == "False 0.1.0+"+broken
	})
	t.Logf("push -> the broken commit refused by the release: %s", time.Since(pushed).Round(time.Second))
	status = bootstrapOK(t, "status", env, "--repo", r.dir, "--age-key-file", r.key)
	for _, want := range []string{"release cluster-init: ", "cluster.workers.replicas", broken} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q while the commit is refused:\n%s", want, status)
		}
	}

	// 6. Removed by a commit of the tenant, while the platform's commit is refused: its machines
	// go, nothing of the management cluster changes.
	if err := os.RemoveAll(filepath.Join(r.dir, "clusters/management/workload-clusters/wl1")); err != nil {
		t.Fatal(err)
	}
	pushed = r.commit(t, "remove wl1")
	waitFor(t, 15*time.Minute, "every container of wl1 gone", func() bool {
		return docker(t, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster=wl1") == "" &&
			kubectlQuiet(kc, "-n", "workload-clusters", "get", "clusters", "-o", "name") == ""
	})
	t.Logf("push -> wl1 deleted (Receiver): %s", time.Since(pushed).Round(time.Second))
	if after := machineIDs(t, kc, "cluster-init"); !includes(after, machinesBefore) || runningMachines(t, kc, "cluster-init", "management") != 3 {
		t.Errorf("the management cluster's machines changed: %v -> %v", machinesBefore, after)
	}

	// 7. The revert heals: the release is ready at it, and status shows it no more.
	r.write(t, valuesFile, good)
	pushed = r.commit(t, "management: revert the negative worker count")
	reverted := r.git(t, "rev-parse", "HEAD")[:12]
	waitFor(t, 5*time.Minute, "the release ready at the revert", func() bool {
		return releaseAt(kc) == "True 0.1.0+"+reverted
	})
	t.Logf("push -> the revert applied by the release: %s", time.Since(pushed).Round(time.Second))
	if status := bootstrapOK(t, "status", env, "--repo", r.dir, "--age-key-file", r.key); strings.Contains(status, "release cluster-init: ") {
		t.Errorf("status still shows the release after the revert:\n%s", status)
	}
	if runningMachines(t, kc, "cluster-init", "management") != 3 {
		t.Error("the revert changed the management cluster's machines")
	}
}

// releaseAt is the cluster-init HelmRelease's Ready status and the chart version it last
// attempted, which names the commit ("False 0.1.0+<commit>").
func releaseAt(kc string) string {
	return kubectlQuiet(kc, "-n", "cluster-init", "get", "helmrelease", "cluster-init", "-o",
		`jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.lastAttemptedRevision}`)
}

// gitToken is the token in the remote's URL.
func gitToken(r *repository) string {
	userinfo, _, _ := strings.Cut(strings.TrimPrefix(r.remote, "http://"), "@")
	_, token, _ := strings.Cut(userinfo, ":")
	return token
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func decodeBase64File(t *testing.T, path string) {
	t.Helper()
	out, err := exec.Command("base64", "-d", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// kubectlQuiet is kubectl's output, or "" when it fails (an object not there yet).
func kubectlQuiet(kubeconfig string, args ...string) string {
	out, _ := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...).Output()
	return strings.TrimSpace(string(out))
}

func runningMachines(t *testing.T, kc, ns, cluster string) int {
	t.Helper()
	phases := strings.Fields(kubectlQuiet(kc, "-n", ns, "get", "machines", "-l", "cluster.x-k8s.io/cluster-name="+cluster, "-o", "jsonpath={.items[*].status.phase}"))
	n := 0
	for _, p := range phases {
		if p == "Running" {
			n++
		}
	}
	if n != len(phases) {
		return -1
	}
	return n
}

func machineIDs(t *testing.T, kc, ns string) []string {
	t.Helper()
	return strings.Fields(kubectl(t, kc, "-n", ns, "get", "machines", "-o", "jsonpath={.items[*].spec.providerID}"))
}

func includes(all, some []string) bool {
	for _, s := range some {
		if !slices.Contains(all, s) {
			return false
		}
	}
	return true
}
