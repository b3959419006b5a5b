package steps

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// saved keeps the record as a store outside the process does: a copy per save, which can fail.
type saved struct {
	rec   Record
	saves int
	// failSaveAfter, when > 0, makes that save and every later one fail (the store is gone).
	failSaveAfter int
}

func (s *saved) load() Record {
	var r Record
	data, _ := json.Marshal(s.rec)
	_ = json.Unmarshal(data, &r)
	return r
}

// work is four fake steps that count their runs and can fail, run by a machine over a record
// loaded from s, as a new attempt (a new process) would.
type work struct {
	names []string
	runs  map[string]int
	fail  map[string]error
	// running is, for each step, whether the record said it was running when it ran.
	running map[string]bool
}

func newWork() *work {
	return &work{names: []string{"a", "b", "c", "d"}, runs: map[string]int{}, fail: map[string]error{}, running: map[string]bool{}}
}

func (w *work) attempt(ctx context.Context, s *saved, after func(context.Context, string) error) (Record, error) {
	rec := s.load()
	m := &Machine{
		Record: &rec, What: "work", AfterStep: after,
		Save: func(context.Context) error {
			s.saves++
			if s.failSaveAfter > 0 && s.saves >= s.failSaveAfter {
				return errors.New("the store does not answer")
			}
			s.rec = rec
			s.rec.Done = slices.Clone(rec.Done)
			return nil
		},
	}
	var list []Step
	for _, name := range w.names {
		list = append(list, Step{Name: name, Run: func(context.Context) error {
			w.runs[name]++
			w.running[name] = s.load().Running == name
			return w.fail[name]
		}})
	}
	err := m.Run(ctx, list)
	return rec, err
}

// Interrupted after any step, the next attempt runs only the steps not done, each exactly once in
// all.
func TestWorkInterruptedAfterAnyStepResumesAtTheNextOne(t *testing.T) {
	for _, stop := range newWork().names {
		t.Run("after "+stop, func(t *testing.T) {
			s := &saved{}
			w := newWork()
			stopped := false
			kill := func(_ context.Context, step string) error {
				if step == stop && !stopped {
					stopped = true
					return errors.New("killed")
				}
				return nil
			}
			if _, err := w.attempt(t.Context(), s, kill); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("first attempt: %v", err)
			}
			if _, err := w.attempt(t.Context(), s, kill); err != nil {
				t.Fatalf("second attempt: %v", err)
			}
			for _, name := range w.names {
				if w.runs[name] != 1 {
					t.Errorf("step %s ran %d times", name, w.runs[name])
				}
			}
			if !slices.Equal(s.rec.Done, w.names) || s.rec.Attempts != 2 || s.rec.Running != "" || !s.rec.AllDone(w.names...) {
				t.Errorf("record: %+v", s.rec)
			}
		})
	}
}

// A step is recorded running before it runs: an attempt killed in it leaves a record that says
// its effect may be there.
func TestAStepIsRecordedRunningBeforeItRuns(t *testing.T) {
	s := &saved{}
	w := newWork()
	w.fail["c"] = errors.New("killed in c")
	if _, err := w.attempt(t.Context(), s, nil); err == nil {
		t.Fatal("no failure")
	}
	for _, name := range []string{"a", "b", "c"} {
		if !w.running[name] {
			t.Errorf("step %s ran before the record said it was running", name)
		}
	}
	if s.rec.Running != "c" || !s.rec.Began("c") || s.rec.IsDone("c") || s.rec.Began("d") {
		t.Errorf("record after a kill in c: %+v", s.rec)
	}
}

// A transient failure leaves the step to the next attempt; a permanent one is recorded and every
// later attempt stops at once with its reason, without running any step.
func TestTransientFailuresAreRetriedPermanentOnesAreNot(t *testing.T) {
	s := &saved{}
	w := newWork()
	w.fail["b"] = errors.New("connection refused")
	if _, err := w.attempt(t.Context(), s, nil); err == nil || IsPermanent(err) || !strings.Contains(err.Error(), "work step b: connection refused") {
		t.Fatalf("transient failure: %v", err)
	}
	if s.rec.Failed != nil || s.rec.IsDone("b") {
		t.Fatalf("a transient failure was recorded: %+v", s.rec)
	}

	w.fail["b"] = nil
	w.fail["d"] = Permanent(errors.New("machines replaced: [m-0]"))
	_, err := w.attempt(t.Context(), s, nil)
	if !IsPermanent(err) || s.rec.Failed == nil || s.rec.Failed.Step != "d" || !strings.Contains(s.rec.Failed.Reason, "machines replaced") {
		t.Fatalf("permanent failure: %v, record %+v", err, s.rec.Failed)
	}
	runs := w.runs["d"]
	w.fail["d"] = nil // even if it would work now: the failure stands
	_, err = w.attempt(t.Context(), s, nil)
	if !IsPermanent(err) || !strings.Contains(err.Error(), "work step d failed for good") || !strings.Contains(err.Error(), "machines replaced") || w.runs["d"] != runs {
		t.Fatalf("after a permanent failure: %v, d ran %d times more", err, w.runs["d"]-runs)
	}
}

// A step is only done once its record is saved: if saving fails, the next attempt runs it again.
func TestAStepIsDoneOnlyOnceRecorded(t *testing.T) {
	// Saves: the attempt, a running, a done, b running, then b done fails.
	s := &saved{failSaveAfter: 5}
	w := newWork()
	if _, err := w.attempt(t.Context(), s, nil); err == nil {
		t.Fatal("a lost record went unnoticed")
	}
	if !slices.Equal(s.rec.Done, []string{"a"}) || s.rec.Running != "b" {
		t.Fatalf("record: %+v", s.rec)
	}
	s.failSaveAfter = 0
	if _, err := w.attempt(t.Context(), s, nil); err != nil {
		t.Fatal(err)
	}
	if w.runs["b"] != 2 || w.runs["a"] != 1 {
		t.Errorf("runs: %v", w.runs)
	}
}

// Do runs single steps as the owner's flow reaches them: a step done is skipped.
func TestDoSkipsAStepDone(t *testing.T) {
	rec := Record{Done: []string{"restore"}}
	m := &Machine{Record: &rec, Save: func(context.Context) error { return nil }}
	ran := 0
	for _, name := range []string{"restore", "change"} {
		if err := m.Do(t.Context(), Step{Name: name, Run: func(context.Context) error { ran++; return nil }}); err != nil {
			t.Fatal(err)
		}
	}
	if ran != 1 || !slices.Equal(rec.Done, []string{"restore", "change"}) {
		t.Errorf("ran %d, record %+v", ran, rec)
	}
}
