package machines_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// A machine whose infrastructure has been ready a while without a node gets its provider asked to
// look again (its DockerMachine annotated), once per NodeWait; a fresh one, a running one, one
// still bootstrapping and one of another cluster are left alone.
func TestAMachineWaitingForItsNodeGetsItsProviderToLookAgain(t *testing.T) {
	c := testenv.Start(t, "test").Client
	ctx := t.Context()
	now := time.Now()

	dockerMachine := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachine",
			"metadata": map[string]any{"namespace": ns, "name": name}, "spec": map[string]any{}}}
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	// phase: Provisioned (a provider ID) and since when its infrastructure is ready, or not yet.
	withPhase := func(m *clusterv1.Machine, phase, node string, since time.Time) {
		m.Status.Phase = phase
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
		m.Status.LastUpdated = metav1.NewTime(since)
		ready := metav1.ConditionTrue
		if since.IsZero() {
			ready, since = metav1.ConditionFalse, now.Add(-2*machines.NodeWait)
		}
		m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineInfrastructureReadyCondition, Status: ready, Reason: "R", LastTransitionTime: metav1.NewTime(since)}}
		if err := c.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	lookedAgainAt := func(name string) string {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
		u.SetKind("DockerMachine")
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			t.Fatal(err)
		}
		return u.GetAnnotations()[machines.LookAgainAnnotation]
	}

	stalled := machine(t, c, "wl-md-stalled", false)
	fresh := machine(t, c, "wl-md-fresh", false)
	running := machine(t, c, "wl-md-running", false)
	booting := machine(t, c, "wl-md-booting", false)
	for _, n := range []string{"wl-md-stalled", "wl-md-fresh", "wl-md-running", "wl-md-booting"} {
		dockerMachine(n)
	}
	withPhase(stalled, "Provisioned", "", now.Add(-2*machines.NodeWait))
	withPhase(fresh, "Provisioned", "", now.Add(-machines.NodeWait/2))
	withPhase(running, "Running", "wl-md-running", now.Add(-2*machines.NodeWait))
	withPhase(booting, "Provisioned", "", time.Time{}) // its bootstrap still runs

	asked, err := machines.AskToLookAgain(ctx, c, ns, "wl", now)
	if err != nil || !slices.Equal(asked, []string{"wl-md-stalled"}) {
		t.Fatalf("asked for %v (%v), want wl-md-stalled alone", asked, err)
	}
	if got := lookedAgainAt("wl-md-stalled"); got != now.UTC().Format(time.RFC3339) {
		t.Errorf("the stalled machine's DockerMachine is annotated %q", got)
	}
	for _, n := range []string{"wl-md-fresh", "wl-md-running", "wl-md-booting"} {
		if got := lookedAgainAt(n); got != "" {
			t.Errorf("%s was asked to look again (%s)", n, got)
		}
	}
	if asked, err := machines.AskToLookAgain(ctx, c, ns, "other", now); err != nil || len(asked) != 0 {
		t.Errorf("another cluster: asked for %v (%v)", asked, err)
	}

	// Not again within NodeWait, whoever asks: the annotation is the record.
	if asked, err := machines.AskToLookAgain(ctx, c, ns, "wl", now.Add(machines.NodeWait/4)); err != nil || len(asked) != 0 {
		t.Errorf("asked again after %s: %v (%v)", machines.NodeWait/4, asked, err)
	}
	later := now.Add(machines.NodeWait + time.Second)
	if asked, err := machines.AskToLookAgain(ctx, c, ns, "wl", later); err != nil || !slices.Equal(asked, []string{"wl-md-fresh", "wl-md-stalled"}) {
		t.Errorf("after NodeWait: asked for %v (%v), want both provisioned machines", asked, err)
	}
	if got := lookedAgainAt("wl-md-stalled"); got != later.UTC().Format(time.RFC3339) {
		t.Errorf("asked again, but the annotation says %q", got)
	}

	// The management cluster's own controller asks for every cluster's machines; one whose
	// infrastructure object is gone is reported, and the others are asked all the same.
	withPhase(machine(t, c, "wl-md-a-gone", false), "Provisioned", "", now.Add(-2*machines.NodeWait))
	evenLater := later.Add(machines.NodeWait + time.Second)
	everywhere, err := machines.AskToLookAgainEverywhere(ctx, c, evenLater)
	if err == nil || !strings.Contains(err.Error(), "wl-md-a-gone") {
		t.Errorf("everywhere: the machine without its DockerMachine was not reported: %v", err)
	}
	if len(everywhere) != 2 || everywhere[0].Namespace != ns || everywhere[1].Namespace != ns {
		t.Errorf("everywhere: asked for %v, want both provisioned machines of %s", everywhere, ns)
	}
}
