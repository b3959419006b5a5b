//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/objectstore"
)

// testbedStore is the test bed's object store (tools/testbed/s3): its keys, and its address as
// the clusters and as this host reach it.
type testbedStore struct {
	access, secret string
	url, hostURL   string
	bucket         string
	script         string
}

func openTestbedStore(t *testing.T) testbedStore {
	t.Helper()
	s := testbedStore{script: filepath.Join(repo, "tools", "testbed", "s3")}
	out := func(args ...string) string {
		b, err := exec.Command(s.script, args...).Output()
		if err != nil {
			t.Fatalf("tools/testbed/s3 %v: %v", args, err)
		}
		return strings.TrimSpace(string(b))
	}
	lines := strings.Fields(readFile(t, out("credentials")))
	if len(lines) != 2 {
		t.Fatal("the test bed's object store has no credentials: tools/testbed/s3 start")
	}
	s.access, s.secret = lines[0], lines[1]
	s.url, s.hostURL, s.bucket = out("url"), out("host-url"), out("bucket")
	return s
}

func (s testbedStore) run(t *testing.T, verb string) {
	t.Helper()
	if out, err := exec.Command(s.script, verb).CombinedOutput(); err != nil {
		t.Fatalf("tools/testbed/s3 %s: %v\n%s", verb, err, out)
	}
}

// alertsReceiver is a webhook on this host that the management cluster's notification-controller
// reaches at the kind network's gateway: the Alert's Provider posts every error event to it.
type alertsReceiver struct {
	address string
	mu      sync.Mutex
	bodies  []string
}

func startAlertsReceiver(t *testing.T) *alertsReceiver {
	t.Helper()
	gateway := ""
	for _, gw := range strings.Fields(docker(t, "network", "inspect", "kind", "--format", "{{range .IPAM.Config}}{{.Gateway}} {{end}}")) {
		if ip := net.ParseIP(gw); ip != nil && ip.To4() != nil {
			gateway = gw
		}
	}
	if gateway == "" {
		t.Fatal("the kind network has no IPv4 gateway")
	}
	l, err := net.Listen("tcp", gateway+":0")
	if err != nil {
		t.Fatal(err)
	}
	a := &alertsReceiver{address: "http://" + l.Addr().String() + "/alerts"}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		a.mu.Lock()
		a.bodies = append(a.bodies, string(body))
		a.mu.Unlock()
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return a
}

func (a *alertsReceiver) received(substr string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.bodies {
		if strings.Contains(b, substr) {
			return true
		}
	}
	return false
}

// Backups of a self-managed management cluster, end to end with the test bed's object store: a
// backup on demand, written encrypted (nothing of the cluster's Secrets in clear in the store),
// whole and of this environment when read back with the key kept off the cluster, listed, shown
// by status; a change by apply preceded by a backup; then the store goes away for longer than the schedule's period: the failure shows in
// status and an Alert reaches the webhook, and a change by apply is refused before anything
// changes; the store comes back and the next backup succeeds; the
// retention keeps the count it is given.
func TestBackupsOfTheManagementCluster(t *testing.T) {
	store := openTestbedStore(t)
	t.Cleanup(func() { store.run(t, "start") })
	alerts := startAlertsReceiver(t)
	identity, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := copyEnvironment(t, env, "backed-up", "credentials:\n  backup:\n    access_key: "+store.access+"\n    secret_key: "+store.secret+"\n")
	values := readFile(t, filepath.Join(dir, "values.yaml")) + `
backup:
  enabled: true
  schedule: "* * * * *"
  recipients: [` + identity.Recipient().String() + `]
  store:
    endpoint: ` + store.url + `
    bucket: ` + store.bucket + `
  retention:
    keep: 3
    max_age_hours: 0
notifications:
  alerts:
    address: ` + alerts.address + `
`
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	envName := filepath.Base(dir)
	cleanup(t, dir)
	t.Cleanup(func() { cleanup(t, dir) })
	hostStore, err := objectstore.New(objectstore.Config{Endpoint: store.hostURL, Bucket: store.bucket, Region: "us-east-1", AccessKey: store.access, SecretKey: store.secret})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	for _, o := range mustList(t, hostStore, envName+"/") {
		_ = hostStore.Delete(ctx, o.Key)
	}

	r := bootstrap(t, ctx, nil, dir, "--values", testbedVs, "--output", "plain")
	r.report(t, "bootstrap with backups")
	if r.err != nil {
		t.Fatalf("bootstrap: %v", r.err)
	}
	kc := state.Environment(dir).ManagementKubeconfig()

	// On demand.
	start := time.Now()
	r = bootstrap(t, ctx, nil, "backup", dir)
	if r.err != nil {
		t.Fatalf("bootstrap backup: %v\n%s", r.err, r.output.String())
	}
	m := regexp.MustCompile(`wrote (\S+) \((.+?)\) in (\S+)`).FindStringSubmatch(r.output.String())
	if m == nil || !strings.HasPrefix(m[1], envName+"/") {
		t.Fatalf("bootstrap backup wrote nothing:\n%s", r.output.String())
	}
	t.Logf("backup on demand: %s, %s, the Job's run %s, the command %s", m[1], m[2], m[3], time.Since(start).Round(time.Second))
	raw, err := hostStore.Get(ctx, m[1], backup.MaxArchiveBytes)
	if err != nil {
		t.Fatal(err)
	}
	caKey := kubectl(t, kc, "-n", "cluster-init", "get", "secret", "management-ca", "-o", "jsonpath={.data.tls\\.key}")
	for _, clear := range []string{caKey, "BEGIN RSA PRIVATE KEY", "kind: Secret", "management-kubeconfig"} {
		if clear != "" && bytes.Contains(raw, []byte(clear)) {
			t.Errorf("the store holds %.40q in clear", clear)
		}
	}
	contents, err := backup.Read(bytes.NewReader(raw), []age.Identity{identity}, backup.Expect{Environment: envName})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := contents.FilesIn(backup.ClusterctlDir("cluster-init"))["Secret_cluster-init_management-ca.yaml"]; !ok {
		t.Errorf("the backup lacks the management cluster's authority: %v", contents.Meta.Namespaces)
	}
	if _, err := backup.Read(bytes.NewReader(raw), []age.Identity{identity}, backup.Expect{Environment: "another"}); err == nil {
		t.Error("a backup read as another environment's was not refused")
	}
	list := bootstrap(t, ctx, nil, "backup", "list", dir, "--store-endpoint", store.hostURL)
	if list.err != nil || !strings.Contains(list.output.String(), m[1]) || !strings.Contains(list.output.String(), "on-demand") {
		t.Errorf("bootstrap backup list: %v\n%s", list.err, list.output.String())
	}
	// A change by `bootstrap apply` is preceded by a backup.
	apply := bootstrap(t, ctx, nil, "apply", dir, "--values", testbedVs, "--output", "plain")
	apply.report(t, "apply with a backup before the change")
	if apply.err != nil || !regexp.MustCompile(`backup before the change: `+regexp.QuoteMeta(envName)+`/\S+-before-change\.tar\.gz\.age`).MatchString(apply.output.String()) {
		t.Errorf("apply: %v, and no backup before the change in its output", apply.err)
	}
	status := bootstrap(t, ctx, nil, "status", dir)
	if !strings.Contains(status.output.String(), "backups: * * * * *; last "+envName+"/") {
		t.Errorf("status does not show the backups:\n%s", status.output.String())
	}

	// The store goes away for longer than the schedule's period.
	store.run(t, "stop")
	stopped := time.Now()
	failedIn, alertIn := waitForBoth(t, ctx, 6*time.Minute, func() (bool, bool) {
		out := bootstrap(t, ctx, nil, "status", dir).output.String()
		return strings.Contains(out, "  ! failed "), alerts.received("BackupFailed")
	})
	t.Logf("store stopped: the failure in status after %s, the Alert after %s", failedIn, alertIn)
	if failedIn == 0 || alertIn == 0 {
		t.Fatalf("the store down for %s: failure in status %v, alert %v\n%s", time.Since(stopped).Round(time.Second), failedIn, alertIn,
			bootstrap(t, ctx, nil, "status", dir).output.String())
	}
	// A change with the store down is refused before anything changes.
	refused := bootstrap(t, ctx, nil, "apply", dir, "--values", testbedVs, "--output", "plain")
	if refused.err == nil || !strings.Contains(refused.output.String(), "nothing was changed (give --no-backup") {
		t.Errorf("apply with the store down: %v\n%s", refused.err, refused.output.String())
	}
	refused.report(t, "apply refused with the store down")
	store.run(t, "start")
	back := time.Now()
	recovered, _ := waitForBoth(t, ctx, 5*time.Minute, func() (bool, bool) {
		out := bootstrap(t, ctx, nil, "status", dir).output.String()
		return strings.Contains(out, "backups: ") && !strings.Contains(out, "  ! failed "), true
	})
	if recovered == 0 {
		t.Fatalf("no backup succeeded %s after the store came back:\n%s", time.Since(back).Round(time.Second), bootstrap(t, ctx, nil, "status", dir).output.String())
	}
	t.Logf("the store back: a backup succeeded after %s", recovered)
	if n := len(mustList(t, hostStore, envName+"/")); n > 3 {
		t.Errorf("%d backups in the store, the retention keeps 3", n)
	}
}

// waitForBoth polls check every 10 s until both its conditions held once, or for at most limit; it
// returns when each first held (0: never).
func waitForBoth(t *testing.T, ctx context.Context, limit time.Duration, check func() (bool, bool)) (time.Duration, time.Duration) {
	t.Helper()
	start := time.Now()
	var first, second time.Duration
	for time.Since(start) < limit && ctx.Err() == nil {
		a, b := check()
		if a && first == 0 {
			first = time.Since(start).Round(time.Second)
		}
		if b && second == 0 {
			second = time.Since(start).Round(time.Second)
		}
		if first != 0 && second != 0 {
			break
		}
		time.Sleep(10 * time.Second)
	}
	return first, second
}

func mustList(t *testing.T, s *objectstore.Store, prefix string) []objectstore.Object {
	t.Helper()
	objs, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
