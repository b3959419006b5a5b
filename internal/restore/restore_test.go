package restore_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/backupjob"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/restore"
	"cluster-init.dev/cluster-init/internal/testenv"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

var errKilled = errors.New("killed")

// killAfter stops a restore once step is recorded done, as a killed process would.
func killAfter(step string) func(context.Context, string) error {
	return func(_ context.Context, done string) error {
		if done == step {
			return errKilled
		}
		return nil
	}
}

// A backup restored into a cluster with a real API server and clusterctl's library: the tenants'
// namespaces that git still names are restored (their certificate authorities too), the
// management cluster's own namespace and a namespace no tenant has any more are left with their
// reasons; the clusters are not left paused; a restore killed in the middle of clusterctl's
// creations and run again creates nothing twice and keeps the owner chain; and a restore under
// way goes on only from the backup it began with.
func TestARestoreBringsTheTenantsClustersBackOnceAndOnlyThem(t *testing.T) {
	env := testenv.Start(t, "restore")
	c := env.Client
	ctx := t.Context()
	testenv.CreateProvisioned(t, c, testenv.ClusterctlProviders()...)
	tenant := func(ns string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{names.TenantLabel: "true"}}}
	}
	testenv.CreateProvisioned(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.Namespace}}, tenant("team-a"), tenant("team-gone"))
	const caKey = "RESTORE-TEST-CA-KEY"
	machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "wl1-md-0-abcde", Labels: map[string]string{clusterv1.ClusterNameLabel: "wl1"}},
		Spec: clusterv1.MachineSpec{ClusterName: "wl1", ProviderID: "docker:////wl1-md-0-abcde",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("wl1-md-0-abcde")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine", Name: "wl1-md-0-abcde"}}}
	testenv.CreateProvisioned(t, c, append(testenv.ClusterAPIObjects("team-a", "wl1", caKey), machine)...)
	testenv.CreateProvisioned(t, c, testenv.ClusterAPIObjects(names.Namespace, "management", caKey)...)
	testenv.CreateProvisioned(t, c, testenv.ClusterAPIObjects("team-gone", "old", caKey)...)
	machine.Status.NodeRef = clusterv1.MachineNodeReference{Name: "wl1-md-0-abcde"}
	if err := c.Status().Update(ctx, machine); err != nil {
		t.Fatal(err)
	}
	contents, err := backupjob.Collect(ctx, env, backup.Meta{Environment: "kubeadm-capd", Cluster: "management", Created: time.Now()}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	// The cluster is lost; git no longer names team-gone as a tenant; the new cluster holds them.
	for _, ns := range []string{"team-a", "team-gone"} {
		for _, o := range testenv.ClusterAPIObjects(ns, map[string]string{"team-a": "wl1", "team-gone": "old"}[ns], caKey) {
			if err := c.Delete(ctx, o); err != nil {
				t.Fatalf("delete %s: %v", o.GetName(), err)
			}
		}
	}
	if err := c.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: machine.Name}}); err != nil {
		t.Fatal(err)
	}
	gone := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: "team-gone"}, gone); err != nil {
		t.Fatal(err)
	}
	delete(gone.Labels, names.TenantLabel)
	if err := c.Update(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := managementstate.Write(ctx, c, names.FieldManager, managementstate.State{SelfManaged: true, HoldTenants: true}); err != nil {
		t.Fatal(err)
	}
	// A restore killed while clusterctl created the objects: the Cluster is there already.
	partial := testenv.ClusterAPIObjects("team-a", "wl1", caKey)[0].(*clusterv1.Cluster)
	partial.Spec.Paused = ptr.To(true)
	if err := c.Create(ctx, partial); err != nil {
		t.Fatal(err)
	}

	opts := restore.Options{Management: env, Key: "kubeadm-capd/20261202T120000Z-schedule.tar.gz.age", Backup: contents, WorkDir: t.TempDir(),
		Interval: 100 * time.Millisecond, StepTimeout: 10 * time.Second, AfterStep: killAfter(restore.StepRestore)}
	if _, err := restore.Run(ctx, opts); !errors.Is(err, errKilled) {
		t.Fatalf("the restore up to its clusterctl step: %v", err)
	}
	rec, found, err := restore.ReadRecord(ctx, c)
	if err != nil || !found {
		t.Fatalf("no record of the restore (%v)", err)
	}
	if !slices.Equal(rec.Namespaces, []string{"team-a"}) || !strings.Contains(rec.Left["team-gone"], "not a tenant's namespace") || rec.Left[names.Namespace] != "" {
		t.Errorf("restored %v, left %v: want team-a restored, team-gone left as no tenant's, the management namespace not considered", rec.Namespaces, rec.Left)
	}
	if len(rec.Machines) != 1 || rec.Machines[0] != (restore.Machine{Namespace: "team-a", Name: machine.Name, Cluster: "wl1", ProviderID: "docker:////wl1-md-0-abcde"}) {
		t.Errorf("the backup's machines recorded: %+v", rec.Machines)
	}
	check := func(when string) map[string]string {
		t.Helper()
		uids := map[string]string{}
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "wl1"}, cl); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if cl.UID != partial.UID {
			t.Errorf("%s: the Cluster that was there was replaced", when)
		}
		if ptr.Deref(cl.Spec.Paused, false) {
			t.Errorf("%s: the cluster is left paused", when)
		}
		uids["Cluster"] = string(cl.UID)
		for _, o := range []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wl1-ca"}}, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wl1-kubeconfig"}},
			&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: machine.Name}}} {
			if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: o.GetName()}, o); err != nil {
				t.Errorf("%s: %s not restored: %v", when, o.GetName(), err)
				continue
			}
			uids[o.GetName()] = string(o.GetUID())
			if m, ok := o.(*clusterv1.Machine); ok && (m.Spec.ProviderID != "docker:////wl1-md-0-abcde" || len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != cl.UID) {
				t.Errorf("%s: machine restored as %+v, owners %+v", when, m.Spec, m.OwnerReferences)
			}
			if s, ok := o.(*corev1.Secret); ok && s.Name == "wl1-ca" && string(s.Data["tls.key"]) != caKey {
				t.Errorf("%s: the certificate authority is not the backup's", when)
			}
		}
		dc := &unstructured.Unstructured{}
		dc.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
		dc.SetKind("DockerCluster")
		if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "wl1"}, dc); err != nil || len(dc.GetOwnerReferences()) != 1 || dc.GetOwnerReferences()[0].UID != cl.UID {
			t.Errorf("%s: DockerCluster wl1 not restored under its Cluster: %v %+v", when, err, dc.GetOwnerReferences())
		}
		old := &clusterv1.ClusterList{}
		if err := c.List(ctx, old, client.InNamespace("team-gone")); err != nil || len(old.Items) != 0 {
			t.Errorf("%s: the namespace git no longer names got clusters back: %d (%v)", when, len(old.Items), err)
		}
		return uids
	}
	first := check("restored")

	// Killed again during the clusterctl step: it runs again and creates nothing twice.
	rec.Done, rec.Running = rec.Done[:1], restore.StepRestore
	if err := restore.WriteRecord(ctx, c, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := restore.Run(ctx, opts); !errors.Is(err, errKilled) {
		t.Fatalf("the restore run again: %v", err)
	}
	if again := check("run again"); !maps.Equal(first, again) {
		t.Errorf("the objects were made again: %v, then %v", first, again)
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace("team-a")); err != nil || len(machines.Items) != 1 {
		t.Errorf("machines after two attempts: %d (%v)", len(machines.Items), err)
	}

	// A restore under way goes on from its own backup only.
	other := opts
	other.Key = "kubeadm-capd/20261202T130000Z-schedule.tar.gz.age"
	if _, err := restore.Run(ctx, other); err == nil || !strings.Contains(err.Error(), "--from "+opts.Key) {
		t.Errorf("a restore from another backup while one is under way: %v", err)
	}
	if got, _, _ := restore.ReadRecord(ctx, c); got.Backup != opts.Key || got.Attempts != rec.Attempts+1 {
		t.Errorf("the record after a refused restore: backup %s, %d attempts", got.Backup, got.Attempts)
	}
	if st, _, _ := managementstate.Read(ctx, c); !st.HoldTenants {
		t.Error("the tenants were released before their clusters were taken back")
	}
}
