package pivot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Step is one step of the pivot. Run must be safe to run again after it was interrupted.
type Step struct {
	Name string
	// Run does the step; what it learns for later steps it records in st, saved with the step.
	Run func(ctx context.Context, st *State) error
}

// PermanentError is a failure that no new attempt can fix (machines replaced, objects that
// cannot move): the pivot records it and stops, and every later attempt stops at once with it.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as a failure no retry can fix.
func Permanent(err error) error { return &PermanentError{Err: err} }

// IsPermanent tells whether err is (or wraps) a permanent failure.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// Store keeps the pivot's record.
type Store interface {
	Load(ctx context.Context) (State, error)
	Save(ctx context.Context, st State) error
}

// machine runs steps in order and records each one done, so that an attempt after any
// interruption resumes at the first step not done.
type machine struct {
	steps []Step
	store Store
	log   func(format string, args ...any)
	// afterStep, if set, runs after a step is recorded done (a test's way to stop the pivot there).
	afterStep func(ctx context.Context, step string) error
	now       func() time.Time
}

// run runs the steps not done yet, then finish with the record marked complete, then saves it. A
// transient failure returns an error for the next attempt to resume from; a permanent one is
// recorded first.
func (m *machine) run(ctx context.Context, finish func(context.Context, State) error) error {
	st, err := m.store.Load(ctx)
	if err != nil {
		return err
	}
	if st.Failed != nil {
		return Permanent(fmt.Errorf("pivot step %s failed for good at %s: %s", st.Failed.Step, st.Failed.At.Format(time.RFC3339), st.Failed.Reason))
	}
	st.Attempts++
	if err := m.store.Save(ctx, st); err != nil {
		return err
	}
	for _, s := range m.steps {
		if slices.Contains(st.Done, s.Name) {
			m.log("step %s: done before", s.Name)
			continue
		}
		m.log("step %s", s.Name)
		start := m.now()
		if stepErr := s.Run(ctx, &st); stepErr != nil {
			err := fmt.Errorf("pivot step %s: %w", s.Name, stepErr)
			if IsPermanent(err) {
				st.Failed = &Failure{Step: s.Name, Reason: stepErr.Error(), At: metav1.NewTime(m.now())}
				if serr := m.store.Save(ctx, st); serr != nil {
					return errors.Join(err, serr)
				}
			}
			return err
		}
		st.Done = append(st.Done, s.Name)
		if err := m.store.Save(ctx, st); err != nil {
			return err
		}
		m.log("step %s: done in %s", s.Name, m.now().Sub(start).Round(time.Second))
		if m.afterStep != nil {
			if err := m.afterStep(ctx, s.Name); err != nil {
				return err
			}
		}
	}
	if st.Completed == nil {
		now := metav1.NewTime(m.now())
		st.Completed = &now
	}
	if err := finish(ctx, st); err != nil {
		return err
	}
	if err := m.store.Save(ctx, st); err != nil {
		return err
	}
	m.log("pivot complete after %d attempts", st.Attempts)
	return nil
}
