package backupjob_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/go-logr/logr"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/backupjob"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/objectstore"
	"cluster-init.dev/cluster-init/internal/testenv"
)

const caSecretKey = "BACKUP-TEST-CA-KEY-never-in-clear"

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// startStore starts an S3 server for the test, with its bucket, and returns the store and its URL.
func startStore(t *testing.T) (*objectstore.Store, string) {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket("backups"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(be).Server())
	t.Cleanup(srv.Close)
	s, err := objectstore.New(objectstore.Config{Endpoint: srv.URL, Bucket: "backups", Region: "us-east-1", AccessKey: "k", SecretKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	return s, srv.URL
}

// A backup on a real API server, with clusterctl's own directory format: every namespace with
// clusters, their certificate authorities and kubeconfigs, the tenants beside them; nothing of
// it in clear in the store; the clusters not left paused; the old backups past their retention
// removed, the newest kept.
func TestABackupHoldsEveryClusterAndNothingInClear(t *testing.T) {
	env := testenv.Start(t, "management")
	c := env.Client
	ctx := t.Context()
	for _, ns := range []string{"capi-system", "capi-kubeadm-bootstrap-system", "capi-kubeadm-control-plane-system", "capd-system", names.Namespace} {
		testenv.CreateProvisioned(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	testenv.CreateProvisioned(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "workload-clusters", Labels: map[string]string{names.TenantLabel: "true"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "workload-clusters", Name: names.TenantParamsConfigMap}, Data: map[string]string{"name_prefix": "wl"}})
	testenv.CreateProvisioned(t, c, testenv.ClusterctlProvider("cluster-api", "capi-system", "cluster-api", "CoreProvider"),
		testenv.ClusterctlProvider("bootstrap-kubeadm", "capi-kubeadm-bootstrap-system", "kubeadm", "BootstrapProvider"),
		testenv.ClusterctlProvider("control-plane-kubeadm", "capi-kubeadm-control-plane-system", "kubeadm", "ControlPlaneProvider"),
		testenv.ClusterctlProvider("infrastructure-docker", "capd-system", "docker", "InfrastructureProvider"))
	testenv.CreateProvisioned(t, c, testenv.ClusterAPIObjects(names.Namespace, "management", caSecretKey)...)
	testenv.CreateProvisioned(t, c, testenv.ClusterAPIObjects("workload-clusters", "wl1", caSecretKey)...)
	testenv.CreateProvisioned(t, c, testenv.ClusterAPIObjects("workload-clusters", "wl2", caSecretKey)...)
	// Another tenant's cluster coming up: its namespace is left out, and no one else's.
	testenv.CreateProvisioned(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{names.TenantLabel: "true"}}})
	testenv.CreateProvisioned(t, c, testenv.ClusterAPIObjects("team-b", testenv.ComingUp, caSecretKey)...)

	store, _ := startStore(t)
	key, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	// Three backups of the past, an hour apart; the retention keeps two, younger than 90 minutes.
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for h := 3; h >= 1; h-- {
		at := now.Add(-time.Duration(h) * time.Hour)
		if err := store.Put(ctx, backup.Key("kubeadm-capd", at, backup.ReasonSchedule), bytes.NewReader([]byte("old")), 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Put(ctx, "kubeadm-capd/notes.txt", bytes.NewReader([]byte("x")), 1, nil); err != nil {
		t.Fatal(err)
	}
	cluster, err := kube.FromKubeconfig("management", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	res, err := backupjob.Take(ctx, cluster, backupjob.Options{Environment: "kubeadm-capd", Cluster: "management", Reason: backup.ReasonSchedule,
		Version: "test", Store: store, Recipients: []age.Recipient{key.Recipient()}, Retention: backup.Retention{Keep: 2, MaxAge: 90 * time.Minute},
		WorkDir: t.TempDir(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	entry := res.Entry
	if len(res.Skipped) != 1 || res.Skipped[0].Name != "team-b" || !strings.Contains(res.Skipped[0].Skipped, "cluster coming-up is still provisioning") {
		t.Errorf("namespaces left out: %+v, want team-b's alone", res.Skipped)
	}
	if entry.Key != "kubeadm-capd/20261202T120000Z-schedule.tar.gz.age" || entry.Size == 0 {
		t.Errorf("the backup written: %+v", entry)
	}
	raw, err := store.Get(ctx, entry.Key, backup.MaxArchiveBytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, clear := range []string{caSecretKey, "kubeconfig of wl1", "workload-clusters", "Secret"} {
		if bytes.Contains(raw, []byte(clear)) {
			t.Errorf("the store holds %q in clear", clear)
		}
	}
	got, err := backupjob.Fetch(ctx, store, entry, "kubeadm-capd", []age.Identity{key})
	if err != nil {
		t.Fatal(err)
	}
	var nss []string
	for _, ns := range got.Meta.Namespaces {
		nss = append(nss, ns.Name+"="+strings.Join(ns.Clusters, ",")+map[bool]string{true: " (management)", false: ""}[ns.Management])
	}
	if strings.Join(nss, "; ") != "cluster-init=management (management); team-b=coming-up; workload-clusters=wl1,wl2" {
		t.Errorf("namespaces backed up: %v", nss)
	}
	files := got.FilesIn(backup.ClusterctlDir("workload-clusters"))
	var found []string
	for name, data := range files {
		found = append(found, name)
		if strings.HasPrefix(name, "Secret_") && strings.Contains(name, "wl1-ca") && !bytes.Contains(data, []byte("QkFDS1VQLVRFU1QtQ0EtS0VZ")) {
			t.Errorf("%s does not hold the authority's key: %s", name, data)
		}
	}
	for _, want := range []string{"Cluster_workload-clusters_wl1.yaml", "DockerCluster_workload-clusters_wl2.yaml", "Secret_workload-clusters_wl1-ca.yaml", "Secret_workload-clusters_wl2-kubeconfig.yaml"} {
		if _, ok := files[want]; !ok {
			t.Errorf("no %s among clusterctl's files of workload-clusters: %v", want, found)
		}
	}
	if !bytes.Contains(got.Files["platform/tenants.yaml"], []byte("name_prefix: wl")) {
		t.Errorf("the tenants kept: %s", got.Files["platform/tenants.yaml"])
	}
	for _, name := range []string{"management", "wl1"} {
		ns := map[string]string{"management": names.Namespace, "wl1": "workload-clusters"}[name]
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil || (cl.Spec.Paused != nil && *cl.Spec.Paused) {
			t.Errorf("cluster %s after the backup: paused %v, %v", name, cl.Spec.Paused, err)
		}
	}
	entries, err := backupjob.List(ctx, store, "kubeadm-capd")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Created.Format("15:04"))
	}
	if strings.Join(left, " ") != "11:00 12:00" {
		t.Errorf("backups after the retention: %v, want 11:00 and the new 12:00", left)
	}
	if _, err := store.Get(ctx, "kubeadm-capd/notes.txt", 10); err != nil {
		t.Errorf("the retention removed an object that is no backup: %v", err)
	}
}

type notes []string

func (n *notes) Notify(_ context.Context, severity, reason, message string) {
	*n = append(*n, severity+" "+reason+": "+message)
}

func (n notes) has(reason string) bool {
	for _, s := range n {
		if strings.Contains(s, " "+reason+": ") {
			return true
		}
	}
	return false
}

// The Job's runs: one killed while the clusters were paused leaves them to the next, which
// resumes them; each run is recorded for `bootstrap status`, a namespace left out and a failure
// are notified, and so is a last backup older than twice the schedule's period. A store that
// does not answer fails the run, and the last success stays on record.
func TestTheJobRecordsItsRunsAndResumesWhatAKilledOneLeftPaused(t *testing.T) {
	env := testenv.Start(t, "management")
	c := env.Client
	ctx := t.Context()
	for _, ns := range []string{"capi-system", "capd-system", names.Namespace} {
		testenv.CreateProvisioned(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	testenv.CreateProvisioned(t, c, testenv.ClusterctlProvider("cluster-api", "capi-system", "cluster-api", "CoreProvider"),
		testenv.ClusterctlProvider("infrastructure-docker", "capd-system", "docker", "InfrastructureProvider"))
	testenv.CreateProvisioned(t, c, testenv.ClusterAPIObjects(names.Namespace, "management", caSecretKey)...)
	testenv.CreateProvisioned(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{names.TenantLabel: "true"}}})
	testenv.CreateProvisioned(t, c, testenv.ClusterAPIObjects("team-b", testenv.ComingUp, caSecretKey)...)

	// A run killed after it paused the management cluster.
	mgmt := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: "management"}, mgmt); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(mgmt.DeepCopy())
	mgmt.Spec.Paused = ptr.To(true)
	if err := c.Patch(ctx, mgmt, patch); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	killed, _ := json.Marshal(backupjob.Status{
		LastSuccess: &backupjob.Attempt{Reason: "schedule", Finished: now.Add(-3 * time.Hour), Key: "kubeadm-capd/20261202T090000Z-schedule.tar.gz.age"},
		InProgress:  &backupjob.InProgress{Reason: "schedule", Started: now.Add(-time.Hour), Pauses: []string{names.Namespace + "/management", "gone/cluster"}}})
	testenv.CreateProvisioned(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: names.BackupStatusConfigMap}, Data: map[string]string{"status.json": string(killed)}})

	_, storeURL := startStore(t)
	key, _ := age.GenerateX25519Identity()
	cfg := backupjob.Config{Environment: "kubeadm-capd", Cluster: "management"}
	cfg.Backup.Schedule = "0 * * * *"
	cfg.Backup.Recipients = []string{key.Recipient().String()}
	cfg.Backup.Store.Endpoint, cfg.Backup.Store.Bucket, cfg.Backup.Store.Region = storeURL, "backups", "us-east-1"
	cfg.Backup.Retention.Keep = 5
	keys := t.TempDir()
	for name, v := range map[string]string{backupjob.AccessKeyFile: "k", backupjob.SecretKeyFile: "s"} {
		if err := os.WriteFile(filepath.Join(keys, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cluster, err := kube.FromKubeconfig("management", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var sent notes
	run := backupjob.RunOptions{Namespace: names.Namespace, Config: cfg, StoreKeys: keys, Reason: backup.ReasonSchedule, Version: "test",
		WorkDir: t.TempDir(), Notifier: &sent, Now: func() time.Time { return now }}
	res, err := backupjob.Run(ctx, cluster, run)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(mgmt), mgmt); err != nil || ptr.Deref(mgmt.Spec.Paused, false) {
		t.Errorf("the management cluster after the run: paused %v, %v", mgmt.Spec.Paused, err)
	}
	st, found, err := backupjob.ReadStatus(ctx, c, names.Namespace)
	if err != nil || !found {
		t.Fatalf("status: %v (found %v)", err, found)
	}
	if st.InProgress != nil || st.LastSuccess == nil || st.LastSuccess.Key != res.Entry.Key || len(st.LastSuccess.Skipped) != 1 || st.LastFailure != nil {
		t.Errorf("status after the run: %+v", st)
	}
	for _, want := range []string{backupjob.ReasonStale, backupjob.ReasonPartial, backupjob.ReasonSucceeded} {
		if !sent.has(want) {
			t.Errorf("no %s notified: %q", want, sent)
		}
	}

	// The store goes away.
	sent = nil
	run.Config.Backup.Store.Endpoint = "http://127.0.0.1:1"
	run.Now = func() time.Time { return now.Add(time.Hour) }
	if _, err := backupjob.Run(ctx, cluster, run); err == nil {
		t.Fatal("a run without its store succeeded")
	}
	st, _, _ = backupjob.ReadStatus(ctx, c, names.Namespace)
	if st.LastFailure == nil || !strings.Contains(st.LastFailure.Message, "127.0.0.1:1") || st.LastSuccess == nil || st.LastSuccess.Key != res.Entry.Key {
		t.Errorf("status after a failed run: %+v", st)
	}
	if !sent.has(backupjob.ReasonFailed) || sent.has(backupjob.ReasonStale) {
		t.Errorf("notified after a failed run: %q", sent)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(mgmt), mgmt); err != nil || ptr.Deref(mgmt.Spec.Paused, false) {
		t.Errorf("a failed run left the management cluster paused: %v, %v", mgmt.Spec.Paused, err)
	}

	// Another run holds the lock: this one waits, and runs nothing while it does.
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: names.BackupLock}, lease); err != nil {
		t.Fatalf("the runs left no lock: %v", err)
	}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = ptr.To("another-run"), ptr.To(int32(600)), &metav1.MicroTime{Time: time.Now()}
	if err := c.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	sent = nil
	short, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	if _, err := backupjob.Run(short, cluster, run); err == nil || !strings.Contains(err.Error(), "another backup held Lease") {
		t.Errorf("a run while another holds the lock: %v", err)
	}
	if len(sent) != 0 {
		t.Errorf("a run that never got the lock notified %q", sent)
	}

	// The Job's notifier: a Flux event posted to notification-controller's address, and a
	// Kubernetes Event on the unit's Kustomization.
	posted := make(chan string, 4)
	events := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		posted <- string(body)
	}))
	defer events.Close()
	var log bytes.Buffer
	fe, err := backupjob.NewFluxEvents(cluster, names.Namespace, names.BackupUnit, events.URL, &log)
	if err != nil {
		t.Fatal(err)
	}
	fe.Notify(ctx, "error", backupjob.ReasonFailed, "backup of kubeadm-capd failed: the store is down")

	select {
	case body := <-posted:
		for _, want := range []string{`"kind":"Kustomization"`, `"name":"backup"`, `"severity":"error"`, `"reason":"BackupFailed"`} {
			if !strings.Contains(body, want) {
				t.Errorf("the event posted lacks %s: %s", want, body)
			}
		}
	case <-time.After(30 * time.Second):
		t.Errorf("no event posted to notification-controller's address; the log: %s", log.String())
	}
	evs := &corev1.EventList{}
	if err := c.List(ctx, evs, client.InNamespace(names.Namespace)); err != nil {
		t.Fatal(err)
	}
	recorded := false
	for _, e := range evs.Items {
		recorded = recorded || (e.InvolvedObject.Kind == "Kustomization" && e.Reason == backupjob.ReasonFailed)
	}
	if !recorded {
		t.Errorf("no Kubernetes Event on the backup unit's Kustomization: %d events", len(evs.Items))
	}
}
