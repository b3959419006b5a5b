package pivot

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// memoryStore keeps the record like the ConfigMap does: a copy per save.
type memoryStore struct {
	st    State
	saves int
	// failSaveAfter, when > 0, makes that save and every later one fail (the API server is gone).
	failSaveAfter int
}

func (s *memoryStore) Load(context.Context) (State, error) { return copyState(s.st), nil }
func (s *memoryStore) Save(_ context.Context, st State) error {
	s.saves++
	if s.failSaveAfter > 0 && s.saves >= s.failSaveAfter {
		return errors.New("the API server does not answer")
	}
	s.st = copyState(st)
	return nil
}

func copyState(st State) State {
	st.Done = slices.Clone(st.Done)
	if st.ProviderIDs != nil {
		ids := map[string]string{}
		for k, v := range st.ProviderIDs {
			ids[k] = v
		}
		st.ProviderIDs = ids
	}
	return st
}

// world is a pivot of fake steps: it counts how often each step ran, and can make a step fail.
type world struct {
	runs     map[string]int
	fail     map[string]error
	finished int
}

func newWorld() *world { return &world{runs: map[string]int{}, fail: map[string]error{}} }

func (w *world) machine(store Store) *machine {
	var steps []Step
	for _, name := range StepNames() {
		steps = append(steps, Step{Name: name, Run: func(_ context.Context, st *State) error {
			w.runs[name]++
			if err := w.fail[name]; err != nil {
				return err
			}
			if name == StepWaitReady {
				st.ProviderIDs = map[string]string{"m-0": "docker:////m-0"}
			}
			return nil
		}})
	}
	return &machine{steps: steps, store: store, log: func(string, ...any) {}, now: time.Now}
}

func (w *world) finish(context.Context, State) error {
	w.finished++
	return nil
}

// Interrupted after any step, the next attempt runs only the steps not done, each exactly once in
// all, and what a step recorded reaches the later ones.
func TestAPivotInterruptedAfterAnyStepResumesAtTheNextOne(t *testing.T) {
	for _, stop := range StepNames() {
		t.Run("after "+stop, func(t *testing.T) {
			store := &memoryStore{}
			w := newWorld()
			m := w.machine(store)
			stopped := false
			m.afterStep = func(_ context.Context, step string) error {
				if step == stop && !stopped {
					stopped = true
					return errors.New("killed")
				}
				return nil
			}
			if err := m.run(t.Context(), w.finish); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("first attempt: %v", err)
			}
			if store.st.Completed != nil || w.finished != 0 {
				t.Fatal("complete after an interruption")
			}
			if err := m.run(t.Context(), w.finish); err != nil {
				t.Fatalf("second attempt: %v", err)
			}
			for _, name := range StepNames() {
				if w.runs[name] != 1 {
					t.Errorf("step %s ran %d times", name, w.runs[name])
				}
			}
			if !slices.Equal(store.st.Done, StepNames()) || store.st.Completed == nil || w.finished != 1 || store.st.Attempts != 2 {
				t.Errorf("record: %+v, finished %d", store.st, w.finished)
			}
			if store.st.ProviderIDs["m-0"] == "" {
				t.Error("what wait-ready recorded was lost")
			}
			if err := store.st.CheckComplete(); err != nil {
				t.Error(err)
			}
		})
	}
}

// A transient failure leaves the step to the next attempt; a permanent one is recorded and every
// later attempt stops at once with its reason, without running any step.
func TestTransientFailuresAreRetriedPermanentOnesAreNot(t *testing.T) {
	store := &memoryStore{}
	w := newWorld()
	w.fail[StepMove] = errors.New("connection refused")
	m := w.machine(store)
	if err := m.run(t.Context(), w.finish); err == nil || IsPermanent(err) {
		t.Fatalf("transient failure: %v", err)
	}
	if store.st.Failed != nil || slices.Contains(store.st.Done, StepMove) {
		t.Fatalf("a transient failure was recorded: %+v", store.st)
	}

	w.fail[StepMove] = nil
	w.fail[StepVerify] = Permanent(errors.New("machines replaced during the pivot: [m-0]"))
	err := m.run(t.Context(), w.finish)
	if !IsPermanent(err) || store.st.Failed == nil || store.st.Failed.Step != StepVerify || !strings.Contains(store.st.Failed.Reason, "machines replaced") {
		t.Fatalf("permanent failure: %v, record %+v", err, store.st.Failed)
	}
	runs := w.runs[StepVerify]
	w.fail[StepVerify] = nil // even if it would work now: the failure stands
	err = m.run(t.Context(), w.finish)
	if !IsPermanent(err) || !strings.Contains(err.Error(), "machines replaced") || w.runs[StepVerify] != runs || w.finished != 0 {
		t.Fatalf("after a permanent failure: %v, verify ran %d times", err, w.runs[StepVerify]-runs)
	}
	if err := store.st.CheckComplete(); err == nil || !strings.Contains(err.Error(), "failed for good at step verify") {
		t.Errorf("CheckComplete: %v", err)
	}
}

// A step is only done once its record is saved: if saving fails, the next attempt runs it again.
func TestAStepIsDoneOnlyOnceRecorded(t *testing.T) {
	store := &memoryStore{failSaveAfter: 3} // attempts, save-kubeconfig, then wait-ready's save fails
	w := newWorld()
	m := w.machine(store)
	if err := m.run(t.Context(), w.finish); err == nil {
		t.Fatal("a lost record went unnoticed")
	}
	if !slices.Equal(store.st.Done, []string{StepSaveKubeconfig}) {
		t.Fatalf("done: %v", store.st.Done)
	}
	store.failSaveAfter = 0
	if err := m.run(t.Context(), w.finish); err != nil {
		t.Fatal(err)
	}
	if w.runs[StepWaitReady] != 2 || w.runs[StepSaveKubeconfig] != 1 {
		t.Errorf("runs: %v", w.runs)
	}
}

// The order is defined once, by the steps themselves; what any order must keep: the management
// kubeconfig saved before the move (the move takes the Secret away), the cluster ready before its
// sources are suspended, suspended before the move, the adoption after it, the verification last,
// and no step twice.
func TestStepOrderKeepsWhatThePivotNeeds(t *testing.T) {
	names := StepNames()
	pos := map[string]int{}
	for i, n := range names {
		if _, twice := pos[n]; twice {
			t.Errorf("step %s twice in %v", n, names)
		}
		pos[n] = i
	}
	for _, before := range [][2]string{
		{StepSaveKubeconfig, StepMove}, {StepWaitReady, StepSuspend}, {StepSuspend, StepMove}, {StepMove, StepAdopt}, {StepAdopt, StepVerify},
	} {
		a, okA := pos[before[0]]
		b, okB := pos[before[1]]
		if !okA || !okB || a >= b {
			t.Errorf("%s must come before %s: %v", before[0], before[1], names)
		}
	}
	if names[len(names)-1] != StepVerify {
		t.Errorf("the verification is not last: %v", names)
	}
}
