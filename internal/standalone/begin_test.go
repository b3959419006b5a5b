package standalone

import (
	"strings"
	"testing"
	"time"

	"cluster-init.dev/cluster-init/internal/steps"
)

// validState is a state that Load accepts, with the change under way pending.
func validState(env string, pending *Operation) *State {
	return &State{Environment: env, Cluster: "solo", Namespace: "cluster-init", Recipient: "age1test", Pending: pending,
		BootstrapCluster: BootstrapCluster{Name: "bootstrap", NodeImage: "kindest/node:v1.37.0"}, ManagementUnits: []ManagementUnit{{Name: CNIUnit}}}
}

// What a command that changes a standalone cluster does with the change under way, if any, and
// with the temporary management cluster it finds: each case of Manage's first decision.
func TestBeginContinuesOrRefusesWhatIsUnderWay(t *testing.T) {
	started := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	now := started.Add(time.Hour)
	two := 2
	scale := Operation{Command: CommandScale, Workers: &two}
	for _, c := range []struct {
		name      string
		pending   *Operation
		ask       Operation
		exists    bool
		wantErr   string
		wantDone  bool
		wantNote  string
		restored  bool // the new operation has the restore done
		sinceThen bool // the new operation keeps the interrupted one's start
	}{
		{name: "new change", ask: scale},
		{name: "a kind cluster nobody left", ask: scale, exists: true, wantErr: "is not one this command left"},
		{name: "a creation under way", pending: &Operation{Command: CommandCreate}, ask: scale, wantErr: "is still being created"},
		{name: "a deletion under way, another command", pending: &Operation{Command: CommandDelete, Record: steps.Record{Running: StepChange}, Started: started}, ask: scale, wantErr: "is being deleted"},
		{name: "a deletion whose temporary cluster is gone", pending: &Operation{Command: CommandDelete, Record: steps.Record{Done: []string{StepRestore}, Running: StepChange}, Started: started}, ask: Operation{Command: CommandDelete},
			wantErr: "not restored from the state, which would bring the cluster back"},
		{name: "a deletion continued", pending: &Operation{Command: CommandDelete, Record: steps.Record{Done: []string{StepRestore}, Running: StepChange}, Started: started}, ask: Operation{Command: CommandDelete}, exists: true,
			wantNote: "an interrupted `delete`", restored: true, sinceThen: true},
		{name: "a scale that was kept", pending: &Operation{Command: CommandScale, Record: steps.Record{Done: []string{StepRestore, StepChange, StepExport}}, Started: started}, ask: scale, exists: true, wantDone: true,
			wantNote: "only the temporary management cluster remains"},
		{name: "a scale whose temporary cluster is gone", pending: &Operation{Command: CommandScale, Record: steps.Record{Done: []string{StepRestore}, Running: StepChange}, Started: started}, ask: scale,
			wantNote: "restored from the state exported last", sinceThen: true},
		{name: "a scale continued as an upgrade", pending: &Operation{Command: CommandScale, Record: steps.Record{Done: []string{StepRestore}}, Started: started}, ask: Operation{Command: CommandUpgrade, KubernetesVersion: "v1.37.1"}, exists: true,
			restored: true, sinceThen: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := DirOf(t.TempDir(), "env")
			if err != nil {
				t.Fatal(err)
			}
			before := map[string]string{"m1": "docker:////m1"}
			st := validState("env", c.pending)
			st.Machines = before
			done, notes, err := d.Begin(st, c.ask, func() (bool, error) { return c.exists, nil }, now)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %v, want %q", err, c.wantErr)
				}
				if st.Pending != c.pending {
					t.Error("a refused command changed the change under way")
				}
				return
			}
			if err != nil || done != c.wantDone {
				t.Fatalf("done %t, %v", done, err)
			}
			if c.wantNote != "" && !strings.Contains(strings.Join(notes, "\n"), c.wantNote) {
				t.Errorf("notes %q, want %q", notes, c.wantNote)
			}
			if done {
				return
			}
			p := st.Pending
			if p.Command != c.ask.Command || p.KubernetesVersion != c.ask.KubernetesVersion || p.Began(StepChange) || p.Complete() || p.IsDone(StepRestore) != c.restored {
				t.Errorf("the change recorded: %+v", p)
			}
			if want := now; c.sinceThen != p.Started.Equal(started) || (!c.sinceThen && !p.Started.Equal(want)) {
				t.Errorf("started %s", p.Started)
			}
			if c.pending == nil && len(st.Before) != 1 {
				t.Error("a new change did not record the machines before it")
			}
			saved, err := d.Load()
			if err != nil || saved.Pending == nil || saved.Pending.Command != c.ask.Command {
				t.Errorf("not saved: %+v, %v", saved, err)
			}
		})
	}
}
