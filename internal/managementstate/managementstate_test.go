package managementstate_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/values"
)

// The state written is the state read, and the values layer the release reads from it.
func TestTheStateIsWhatTheReleaseReads(t *testing.T) {
	c := testenv.Start(t, "state")
	ctx := t.Context()
	if _, found, err := managementstate.Read(ctx, c.Client); err != nil || found {
		t.Fatalf("a cluster with no state: found=%t, %v", found, err)
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.Namespace}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []managementstate.State{{Adopted: true}, {SelfManaged: true}} {
		if err := managementstate.Write(ctx, c.Client, names.FieldManager, want); err != nil {
			t.Fatal(err)
		}
		got, found, err := managementstate.Read(ctx, c.Client)
		if err != nil || !found || got != want || !got.Managed() {
			t.Errorf("wrote %+v, read %+v (found %t, %v)", want, got, found, err)
		}
		cm := &corev1.ConfigMap{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: names.StateConfigMap}, cm); err != nil {
			t.Fatal(err)
		}
		layer, err := values.ParseLayer("state", []byte(cm.Data[names.ValuesKey]), false)
		if err != nil {
			t.Fatal(err)
		}
		if (layer.Data["adopted"] == true) != want.Adopted || (layer.Data["self_managed"] == true) != want.SelfManaged {
			t.Errorf("wrote %+v, the release reads %v", want, layer.Data)
		}
		if name := map[bool]string{true: "adopted", false: "self-managed"}[want.Adopted]; got.String() != name {
			t.Errorf("state %+v is called %q, want %q", got, got.String(), name)
		}
		if cm.Labels[names.WatchLabel] != "Enabled" {
			t.Error("helm-controller does not watch the state ConfigMap")
		}
	}
}

// Two writers of the state each change their own field: an update keeps what the other wrote,
// also when the other writes between its read and its write.
func TestAnUpdateKeepsWhatAnotherWriterChanged(t *testing.T) {
	c := testenv.Start(t, "state")
	ctx := t.Context()
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.Namespace}}); err != nil {
		t.Fatal(err)
	}
	if err := managementstate.Update(ctx, c.Client, "pivot", func(st *managementstate.State) { st.SelfManaged, st.HoldTenants = true, true }); err != nil {
		t.Fatal(err)
	}
	if err := managementstate.Update(ctx, c.Client, "gate", func(st *managementstate.State) { st.ReleasedCommit = "c1" }); err != nil {
		t.Fatal(err)
	}
	tries := 0
	err := managementstate.Update(ctx, c.Client, "restore", func(st *managementstate.State) {
		tries++
		if tries == 1 { // the gate writes after this read
			if err := managementstate.Update(ctx, c.Client, "gate", func(st *managementstate.State) { st.ReleasedCommit = "c2" }); err != nil {
				t.Fatal(err)
			}
		}
		st.HoldTenants = false
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := managementstate.Read(ctx, c.Client)
	if want := (managementstate.State{SelfManaged: true, ReleasedCommit: "c2"}); err != nil || got != want {
		t.Errorf("after the updates the state is %+v (%v), want %+v", got, err, want)
	}
	if tries != 2 {
		t.Errorf("the update that met another write read the state %d times, want 2", tries)
	}
}
