package pivot

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"cluster-init.dev/cluster-init/internal/steps"
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

func (w *world) attempt(store Store) *attempt {
	return &attempt{store: store, log: func(string, ...any) {}, now: time.Now, stepsOf: func(st *State) []steps.Step {
		var out []steps.Step
		for _, name := range StepNames() {
			out = append(out, steps.Step{Name: name, Run: func(context.Context) error {
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
		return out
	}}
}

func (w *world) finish(context.Context, State) error {
	w.finished++
	return nil
}

// The step machine (internal/steps, tested there) resumes a pivot where it stopped; the pivot's
// own part: what a step records reaches the later ones across attempts, and the pivot is
// complete, its record left where the CLI reads it, only once every step is done.
func TestAPivotIsCompleteOnlyOnceEveryStepIsDone(t *testing.T) {
	for _, stop := range StepNames() {
		t.Run("interrupted after "+stop, func(t *testing.T) {
			store := &memoryStore{}
			w := newWorld()
			a := w.attempt(store)
			stopped := false
			a.afterStep = func(_ context.Context, step string) error {
				if step == stop && !stopped {
					stopped = true
					return errors.New("killed")
				}
				return nil
			}
			if err := a.run(t.Context(), w.finish); err == nil {
				t.Fatal("no interruption")
			}
			if store.st.Completed != nil || w.finished != 0 || store.st.CheckComplete() == nil {
				t.Fatal("complete after an interruption")
			}
			if !store.st.Started() {
				t.Error("a pivot that has done a step is not started")
			}
			if err := a.run(t.Context(), w.finish); err != nil {
				t.Fatalf("second attempt: %v", err)
			}
			if store.st.Completed == nil || w.finished != 1 || store.st.Attempts != 2 {
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

// A permanent failure is the pivot's end: CheckComplete says which step and why.
func TestAPermanentFailureEndsThePivot(t *testing.T) {
	store := &memoryStore{}
	w := newWorld()
	w.fail[StepVerify] = Permanent(errors.New("machines replaced during the pivot: [m-0]"))
	if err := w.attempt(store).run(t.Context(), w.finish); !IsPermanent(err) {
		t.Fatalf("permanent failure: %v", err)
	}
	if err := store.st.CheckComplete(); err == nil || !strings.Contains(err.Error(), "failed for good at step verify: machines replaced") {
		t.Errorf("CheckComplete: %v", err)
	}
	if w.finished != 0 {
		t.Error("a failed pivot was finished")
	}
}

// The record reads as the first format wrote it (before the step machine was shared): a pivot
// interrupted by an older build resumes.
func TestARecordOfTheFirstFormatReads(t *testing.T) {
	var st State
	data := `{"done":["save-kubeconfig","wait-ready"],"provider_ids":{"m-0":"docker:////m-0"},"attempts":2,"failed":{"step":"move","reason":"boom","at":"2026-11-20T10:00:00Z"}}`
	if err := json.Unmarshal([]byte(data), &st); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Done, []string{StepSaveKubeconfig, StepWaitReady}) || st.Attempts != 2 || st.ProviderIDs["m-0"] == "" ||
		st.Failed == nil || st.Failed.Step != StepMove || st.Failed.At.IsZero() {
		t.Errorf("read %+v", st)
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
