package standalone

import (
	"os"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/steps"
)

// What `bootstrap cleanup` may do with an environment's standalone state: nothing held without
// one; an interrupted creation is held and removed only when the cleanup succeeds; a created
// cluster, or a change of it under way, is refused (only `bootstrap delete` removes it), and so
// is a state that cannot be read; a second command is refused while the state is held.
func TestCleanupMayRemoveOnlyAnInterruptedCreation(t *testing.T) {
	root := t.TempDir()
	state := func(env string, pending *Operation) Dir {
		t.Helper()
		d, err := DirOf(root, env)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Save(validState(env, pending)); err != nil {
			t.Fatal(err)
		}
		return d
	}
	exists := func(d Dir) bool {
		ok, err := d.Exists()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	if h, err := HoldForCleanup(root, "none"); err != nil || h != nil {
		t.Errorf("no state: %v, %v", h, err)
	}
	if err := (*Hold)(nil).Release(true); err != nil {
		t.Errorf("releasing nothing: %v", err)
	}

	interrupted := state("interrupted", &Operation{Command: CommandCreate})
	h, err := HoldForCleanup(root, "interrupted")
	if err != nil || h == nil {
		t.Fatalf("an interrupted creation: %v, %v", h, err)
	}
	if _, err := interrupted.Lock("second"); err == nil {
		t.Error("the held state could be locked by a second command")
	}
	if err := h.Release(false); err != nil || !exists(interrupted) {
		t.Errorf("a failed cleanup removed the state: %v", err)
	}
	h, err = HoldForCleanup(root, "interrupted")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Release(true); err != nil || exists(interrupted) {
		t.Errorf("a successful cleanup kept the state: %v", err)
	}

	for env, pending := range map[string]*Operation{
		"created":  nil,
		"exported": {Command: CommandCreate, Record: steps.Record{Done: []string{StepRestore, StepChange, StepExport}}},
		"scaling":  {Command: CommandScale},
	} {
		d := state(env, pending)
		if h, err := HoldForCleanup(root, env); err == nil || h != nil || !strings.Contains(err.Error(), "`bootstrap delete "+env+"` deletes it") {
			t.Errorf("%s: %v, %v", env, h, err)
		}
		if !exists(d) {
			t.Errorf("%s: the refused state is gone", env)
		}
		if l, err := d.Lock("after"); err != nil {
			t.Errorf("%s: a refusal kept the lock: %v", env, err)
		} else {
			l.Release()
		}
	}

	broken := state("broken", nil)
	if err := os.WriteFile(broken.file(stateFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := HoldForCleanup(root, "broken"); err == nil || !strings.Contains(err.Error(), "its state unreadable") {
		t.Errorf("an unreadable state: %v", err)
	}
}
