//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/objectstore"
)

// restoredCluster is a tenant's workload cluster the restore must keep: its namespace, its
// kubeconfig, and its machines as they were when the backup was taken.
type restoredCluster struct {
	ns, name, kubeconfig string
	containers           []string
	providerIDs          []string
}

// The management cluster is lost and restored from its backup: two tenants' workload clusters
// serve the hello application, probed every second; a backup is taken, then one cluster is scaled
// by a commit; every container of the management cluster is removed (docker rm -f, no cleanup).
// The restore refuses, before anything is created, a wrong key, a truncated archive and another
// environment's backup; killed in the middle of its clusterctl step it continues when run again.
// Afterwards both clusters are Available on the same machines, the probes never failed, git has
// scaled the cluster again, a commit after the restore is carried out, and status shows every
// unit, the backup's among them.
func TestAManagementClusterIsRestoredFromItsBackup(t *testing.T) {
	requireTestbedImage(t, "cluster-init-testbed/hello:v1")
	store := openTestbedStore(t)
	identity, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "backup.agekey")
	if err := os.WriteFile(keyFile, []byte(identity.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The machine the lost cluster made after the backup runs on, with nothing managing it.
	t.Cleanup(func() {
		for _, c := range []string{"wl1", "b-one"} {
			if ids := containerIDs(t, c); len(ids) > 0 {
				docker(t, append([]string{"rm", "-f"}, ids...)...)
			}
		}
	})
	hostStore, err := objectstore.New(objectstore.Config{Endpoint: store.hostURL, Bucket: store.bucket, Region: "us-east-1", AccessKey: store.access, SecretKey: store.secret})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Minute)
	defer cancel()
	for _, o := range mustList(t, hostStore, env+"/") {
		_ = hostStore.Delete(ctx, o.Key)
	}
	r, _ := bootstrapFromGit(t, ctx, func(r *repository) {
		values := readFile(t, filepath.Join(r.dir, "environment-values", env, "values.yaml"))
		r.write(t, "environment-values/"+env+"/values.yaml", values+tenantsValues+`
backup:
  enabled: true
  schedule: "0 */6 * * *"
  recipients: [`+identity.Recipient().String()+`]
  store:
    endpoint: `+store.url+`
    bucket: `+store.bucket+`
`)
		r.writeSecrets(t, "  backup:\n    access_key: "+store.access+"\n    secret_key: "+store.secret+"\n")
	})
	kc := managementKubeconfig()

	// Two tenants' clusters, each serving hello.
	clusters := []*restoredCluster{{ns: "workload-clusters", name: "wl1"}, {ns: "team-b", name: "b-one"}}
	for _, c := range clusters {
		r.write(t, filepath.Join(tenantDir(c.ns), c.name, "cluster.yaml"), workloadCluster(c.name, "", ""))
	}
	pushed := r.commit(t, "two tenants' clusters")
	fetchTenantSources(t, kc)
	probes := map[string][2]string{}
	for _, c := range clusters {
		waitFor(t, 25*time.Minute, c.name+" Available", func() bool {
			return kubectlQuiet(kc, "-n", c.ns, "get", "cluster", c.name, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`) == "True"
		})
		c.kubeconfig = filepath.Join(t.TempDir(), c.name+".kubeconfig")
		if err := os.WriteFile(c.kubeconfig, []byte(kubectl(t, kc, "-n", c.ns, "get", "secret", c.name+"-kubeconfig", "-o", "jsonpath={.data.value}")), 0o600); err != nil {
			t.Fatal(err)
		}
		decodeBase64File(t, c.kubeconfig)
		manifests := filepath.Join(t.TempDir(), c.name+"-hello.yaml")
		if err := os.WriteFile(manifests, []byte(strings.Replace(rollingHello, "--cluster=wl1", "--cluster="+c.name, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Minute, "hello applied to "+c.name, func() bool {
			return exec.Command("kubectl", "--kubeconfig", c.kubeconfig, "apply", "-f", manifests).Run() == nil
		})
		waitFor(t, 5*time.Minute, "hello answering in "+c.name, func() bool {
			return kubectlQuiet(c.kubeconfig, "-n", "hello", "get", "deployment", "hello", "-o", "jsonpath={.status.availableReplicas}") == "2"
		})
		probes[c.name+" hello Service"] = [2]string{c.kubeconfig, "/api/v1/namespaces/hello/services/hello:80/proxy/"}
	}
	t.Logf("push -> both tenants' clusters Available and serving hello: %s", time.Since(pushed).Round(time.Second))
	hello := startProbe(t, "hello throughout", probes)
	helloFinished := false
	defer func() {
		if !helloFinished {
			hello.finish(t)
		}
	}()

	// A change of the platform by commit (the backups' schedule) is held until a backup before it
	// is written: the change gate.
	changeGateHoldsACommit(t, ctx, kc, r, hostStore)

	// The backup; then wl1 scaled by a commit, which the backup does not hold.
	took := bootstrap(t, ctx, nil, "backup", env)
	m := regexp.MustCompile(`wrote (\S+) \((.+?)\) in (\S+)`).FindStringSubmatch(took.output.String())
	if took.err != nil || m == nil {
		t.Fatalf("bootstrap backup: %v\n%s", took.err, took.output.String())
	}
	t.Logf("backup %s: %s, the Job's run %s, the command %s", m[1], m[2], m[3], took.wall.Round(time.Second))
	for _, c := range clusters {
		c.containers = containerIDs(t, c.name)
		c.providerIDs = machineIDs(t, kc, c.ns)
	}
	scaled := strings.Replace(workloadCluster("wl1", "", ""), "      workers:\n        replicas: 1", "      workers:\n        replicas: 2", 1)
	r.write(t, filepath.Join(tenantDir("workload-clusters"), "wl1", "cluster.yaml"), scaled)
	pushed = r.commit(t, "wl1: two workers")
	fetchTenantSources(t, kc)
	waitFor(t, 15*time.Minute, "wl1 with two workers", func() bool { return runningMachines(t, kc, "workload-clusters", "wl1") == 3 })
	t.Logf("push -> wl1 scaled to two workers: %s", time.Since(pushed).Round(time.Second))
	// A commit of tenants' directories alone changes nothing of the platform: the change gate
	// released it without a backup, and the one on demand is still the newest.
	if objs := mustList(t, hostStore, env+"/"); len(objs) == 0 || slices.MaxFunc(objs, func(a, b objectstore.Object) int { return strings.Compare(a.Key, b.Key) }).Key != m[1] {
		t.Errorf("after a commit of a tenant's directory the newest backup is not %s: %v", m[1], objs)
	}

	// The management cluster is lost.
	lost := containerIDs(t, "management")
	if len(lost) < 3 {
		t.Fatalf("the management cluster's containers: %v", lost)
	}
	docker(t, append([]string{"rm", "-f"}, lost...)...)
	destroyed := time.Now()
	t.Logf("the management cluster destroyed: %d containers removed", len(lost))

	// Refusals, before anything is created.
	raw, err := hostStore.Get(ctx, m[1], backup.MaxArchiveBytes)
	if err != nil {
		t.Fatal(err)
	}
	good, err := backup.Read(bytes.NewReader(raw), []age.Identity{identity}, backup.Expect{Environment: env})
	if err != nil {
		t.Fatal(err)
	}
	other := good
	other.Meta.Environment = "another-environment"
	var otherRaw bytes.Buffer
	if err := backup.Write(&otherRaw, other, []age.Recipient{identity.Recipient()}); err != nil {
		t.Fatal(err)
	}
	later := good.Meta.Created.Add(time.Minute)
	truncatedKey, otherKey := backup.Key(env, later, backup.ReasonOnDemand), backup.Key(env, later.Add(time.Minute), backup.ReasonOnDemand)
	for key, data := range map[string][]byte{truncatedKey: raw[:len(raw)/2], otherKey: otherRaw.Bytes()} {
		if err := hostStore.Put(ctx, key, bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
	wrongKey := filepath.Join(t.TempDir(), "wrong.agekey")
	wrong, _ := age.GenerateX25519Identity()
	if err := os.WriteFile(wrongKey, []byte(wrong.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	restoreArgs := func(key, from string) []string {
		return []string{"restore", env, "--repo", r.dir, "--age-key-file", r.key, "--values", testbedVs, "--output", "plain",
			"--identity", key, "--store-endpoint", store.hostURL, "--from", from}
	}
	containersBefore := docker(t, "ps", "-aq")
	for _, refusal := range []struct{ what, key, from, says string }{
		{"a wrong key", wrongKey, m[1], "encrypted to other recipients"},
		{"a truncated archive", keyFile, truncatedKey, "damaged"},
		{"another environment's backup", keyFile, otherKey, "another-environment"},
	} {
		out := bootstrap(t, ctx, nil, restoreArgs(refusal.key, refusal.from)...)
		if out.err == nil || !strings.Contains(out.output.String(), refusal.says) || !strings.Contains(out.output.String(), "nothing was created") {
			t.Errorf("restore from %s: %v, want a refusal saying %q and that nothing was created:\n%s", refusal.what, out.err, refusal.says, tail(out.output.String(), 20))
		}
		if now := docker(t, "ps", "-aq"); now != containersBefore {
			t.Errorf("restore from %s created containers: %s", refusal.what, now)
		}
	}
	for _, key := range []string{truncatedKey, otherKey} {
		_ = hostStore.Delete(ctx, key)
	}

	// The restore, killed in the middle of its clusterctl step, then run again.
	killed := bootstrap(t, ctx, func(line string) bool { return strings.Contains(line, "restoring namespace") }, restoreArgs(keyFile, m[1])...)
	killed.report(t, "restore (killed in its clusterctl step)")
	if !strings.Contains(killed.output.String(), "restoring namespace") {
		t.Fatalf("the restore ended before its clusterctl step: %v\n%s", killed.err, tail(killed.output.String(), 40))
	}
	again := bootstrap(t, ctx, nil, restoreArgs(keyFile, m[1])...)
	again.report(t, "restore run again")
	regained := time.Since(destroyed)
	if again.err != nil {
		t.Fatalf("restore run again: %v\n%s", again.err, tail(again.output.String(), 60))
	}
	t.Logf("recovery time, destruction to control regained: %s (restores: %s killed, %s to the end)", regained.Round(time.Second),
		killed.wall.Round(time.Second), again.wall.Round(time.Second))
	for _, want := range []string{"continuing the restore", "step plan: done before", "step restore the clusters"} {
		if !strings.Contains(again.output.String(), want) {
			t.Errorf("the restore run again does not say %q: it did not continue the first\n%s", want, tail(again.output.String(), 60))
		}
	}
	if strings.Contains(again.output.String(), "creating kind cluster") {
		t.Error("the restore run again made a second bootstrap cluster")
	}
	if !strings.Contains(again.output.String(), "has no machine") {
		t.Errorf("the restore did not name wl1's worker that the lost cluster made after the backup:\n%s", tail(again.output.String(), 30))
	}

	// The same machines, Available, and git's values carried out again.
	for _, c := range clusters {
		if now := containerIDs(t, c.name); !includes(now, c.containers) {
			t.Errorf("%s's containers: %v before, %v after the restore", c.name, c.containers, now)
		}
		if now := machineIDs(t, kc, c.ns); !includes(now, c.providerIDs) {
			t.Errorf("%s's machines: %v before, %v after the restore", c.name, c.providerIDs, now)
		}
		if kubectlQuiet(kc, "-n", c.ns, "get", "cluster", c.name, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`) != "True" {
			t.Errorf("%s is not Available after the restore", c.name)
		}
	}
	waitFor(t, 10*time.Minute, "wl1 with git's 1 control plane and 2 workers after the restore", func() bool {
		return runningMachines(t, kc, "workload-clusters", "wl1") == 3
	})
	// A commit after the restore is carried out.
	r.write(t, filepath.Join(tenantDir("team-b"), "b-one", "cluster.yaml"),
		strings.Replace(workloadCluster("b-one", "", ""), "      workers:\n        replicas: 1", "      workers:\n        replicas: 2", 1))
	pushed = r.commit(t, "b-one: two workers, after the restore")
	fetchTenantSources(t, kc)
	waitFor(t, 15*time.Minute, "b-one with two workers", func() bool { return runningMachines(t, kc, "team-b", "b-one") == 3 })
	t.Logf("push after the restore -> b-one scaled to two workers: %s", time.Since(pushed).Round(time.Second))
	status := bootstrap(t, ctx, nil, "status", env)
	for _, want := range []string{"backup", "workload-clusters", "wl1", "b-one"} {
		if !strings.Contains(status.output.String(), want) {
			t.Errorf("status after the restore does not show %s:\n%s", want, status.output.String())
		}
	}
	// A machine of the lost cluster that still ran (a worker its loss spared, as a container of
	// its name and cluster) goes with cleanup --lost; nothing of the new management cluster does,
	// though its load balancer has the lost one's name.
	left := regexp.MustCompile(`left behind by the lost management cluster \(not removed\): machine \S+, provider ID docker:////(\S+)`).FindStringSubmatch(again.output.String())
	if left == nil {
		t.Fatalf("the restore did not name the lost cluster's machines:\n%s", tail(again.output.String(), 30))
	}
	kept := containerIDs(t, "management")
	image := strings.TrimSpace(docker(t, "inspect", "-f", "{{.Config.Image}}", kept[0]))
	docker(t, "run", "-d", "--name", left[1], "--label", "io.x-k8s.kind.cluster=management", "--entrypoint", "sleep", image, "infinity")
	swept := bootstrap(t, ctx, nil, "cleanup", env, "--lost")
	if swept.err != nil || !strings.Contains(swept.output.String(), "removing 1 containers of the lost management cluster: "+left[1]) {
		t.Errorf("cleanup --lost: %v\n%s", swept.err, swept.output.String())
	}
	if now := containerIDs(t, "management"); !slices.Equal(now, kept) {
		t.Errorf("cleanup --lost: the management cluster's containers were %v, are %v", kept, now)
	}
	helloFinished = true
	for target, n := range hello.finish(t) {
		if n > 0 {
			t.Errorf("%s failed %d requests from before the destruction to the end", target, n)
		}
	}
}

// changeGateHoldsACommit commits a change of the platform (the backups' schedule, in the
// environment's values) and checks that the platform's source applies it only once a backup
// before it is in the store, sampled every second.
func changeGateHoldsACommit(t *testing.T, ctx context.Context, kc string, r *repository, store *objectstore.Store) {
	t.Helper()
	source := func(name, path string) string {
		return kubectlQuiet(kc, "-n", names.Namespace, "get", "gitrepository", name, "-o", "jsonpath="+path)
	}
	waitFor(t, 5*time.Minute, "the platform's source pinned by the change gate", func() bool {
		return source(names.SourceRepository, "{.spec.ref.commit}") != ""
	})
	valuesFile := filepath.Join("environment-values", env, "values.yaml")
	values := readFile(t, filepath.Join(r.dir, valuesFile))
	const was, now = `schedule: "0 */6 * * *"`, `schedule: "0 */4 * * *"`
	if !strings.Contains(values, was) {
		t.Fatalf("%s has no %s", valuesFile, was)
	}
	r.write(t, valuesFile, strings.Replace(values, was, now, 1))
	pushed := r.commit(t, "backups every four hours")
	head := r.git(t, "rev-parse", "HEAD")
	kubectlQuiet(kc, "-n", names.Namespace, "annotate", "--overwrite", "gitrepository", names.IncomingSourceRepository, "reconcile.fluxcd.io/requestedAt="+time.Now().Format(time.RFC3339Nano))
	var before string
	var beforeAt time.Duration
	waitFor(t, 10*time.Minute, "the commit applied after a backup before it", func() bool {
		applied := strings.HasSuffix(source(names.SourceRepository, "{.status.artifact.revision}"), head)
		if before == "" {
			for _, o := range mustList(t, store, env+"/") {
				if strings.HasSuffix(o.Key, "-"+backup.ReasonBeforeChange+".tar.gz.age") && o.Modified.After(pushed.Add(-time.Minute)) {
					before, beforeAt = o.Key, time.Since(pushed)
				}
			}
		}
		if applied && before == "" {
			t.Fatalf("commit %s was applied with no backup before it in the store", head)
		}
		return applied && kubectlQuiet(kc, "-n", names.Namespace, "get", "cronjob", names.BackupCronJob, "-o", "jsonpath={.spec.schedule}") == "0 */4 * * *"
	})
	t.Logf("push -> the backup before the change %s: %s; the change applied: %s", before, beforeAt.Round(time.Second), time.Since(pushed).Round(time.Second))
	out := bootstrap(t, ctx, nil, "status", env)
	if out.err != nil || !strings.Contains(out.output.String(), "backup") {
		t.Errorf("bootstrap status after the change: %v\n%s", out.err, tail(out.output.String(), 20))
	}
}

// tenantDir is the directory of a tenant of tenantsValues in the platform's repository.
func tenantDir(ns string) string {
	return map[string]string{"workload-clusters": "clusters/management/workload-clusters", "team-b": "clusters/management/team-b"}[ns]
}

// tail is the last n lines of out.
func tail(out string, n int) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
