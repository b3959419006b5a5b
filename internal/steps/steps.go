// Package steps runs work made of named steps, each safe to run again, and keeps a record of the
// steps done, so that an attempt after any interruption (a killed process, a restarted Job, a
// lost connection) resumes at the first step not done. The record lives wherever its owner keeps
// its state (the pivot in a ConfigMap of the cluster it runs in, a standalone cluster in its
// state.json): this package says what the record holds and how an attempt moves it on.
package steps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Record is what the attempts of one piece of work have done.
type Record struct {
	// Done are the steps done, in the order they were done.
	Done []string `json:"done"`
	// Running is the step an attempt started and has not recorded done: it may have had its
	// effect, in part or in full.
	Running string `json:"running,omitempty"`
	// Attempts counts the attempts begun.
	Attempts int `json:"attempts"`
	// Failed is set when a step failed for good: no attempt runs again.
	Failed *Failure `json:"failed,omitempty"`
}

// Failure is a step's permanent failure.
type Failure struct {
	Step   string    `json:"step"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// IsDone tells whether step is recorded done.
func (r *Record) IsDone(step string) bool { return slices.Contains(r.Done, step) }

// Began tells whether step was started by an attempt, done or not: its effect may be there.
func (r *Record) Began(step string) bool { return r.Running == step || r.IsDone(step) }

// AllDone tells whether every one of steps is done.
func (r *Record) AllDone(steps ...string) bool {
	return !slices.ContainsFunc(steps, func(s string) bool { return !r.IsDone(s) })
}

// PermanentError is a failure that no new attempt can fix (machines replaced, objects that cannot
// move): it is recorded and every later attempt stops at once with it.
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

// Step is one step. Run must be safe to run again after it was interrupted.
type Step struct {
	Name string
	Run  func(ctx context.Context) error
}

// Machine moves a record on as steps run. A step is done only once the record saying so is
// saved: if saving fails, the next attempt runs it again.
type Machine struct {
	// Record is the record of the work, kept in its owner's state; Save saves that state.
	Record *Record
	Save   func(ctx context.Context) error
	// What names the work in errors ("pivot step move: ...").
	What string
	// Log, if set, says when a step starts, is skipped or is done.
	Log func(format string, args ...any)
	// AfterStep, if set, runs after a step is recorded done (a test's way to stop the work there).
	AfterStep func(ctx context.Context, step string) error
	// Now, if set, is the clock.
	Now func() time.Time
}

// Begin starts an attempt: refused at once after a permanent failure, counted otherwise.
func (m *Machine) Begin(ctx context.Context) error {
	if f := m.Record.Failed; f != nil {
		return Permanent(fmt.Errorf("%s step %s failed for good at %s: %s", m.What, f.Step, f.At.Format(time.RFC3339), f.Reason))
	}
	m.Record.Attempts++
	return m.Save(ctx)
}

// Run begins an attempt and runs the steps not done, in order.
func (m *Machine) Run(ctx context.Context, steps []Step) error {
	if err := m.Begin(ctx); err != nil {
		return err
	}
	for _, s := range steps {
		if err := m.Do(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// Do runs s unless it is done: recorded running before, done after. A transient failure leaves it
// to the next attempt; a permanent one is recorded first.
func (m *Machine) Do(ctx context.Context, s Step) error {
	if m.Record.IsDone(s.Name) {
		m.log("step %s: done before", s.Name)
		return nil
	}
	m.log("step %s", s.Name)
	start := m.now()
	m.Record.Running = s.Name
	if err := m.Save(ctx); err != nil {
		return err
	}
	if stepErr := s.Run(ctx); stepErr != nil {
		err := fmt.Errorf("%s step %s: %w", m.What, s.Name, stepErr)
		if IsPermanent(err) {
			m.Record.Failed = &Failure{Step: s.Name, Reason: stepErr.Error(), At: m.now().UTC().Truncate(time.Second)}
			if serr := m.Save(ctx); serr != nil {
				return errors.Join(err, serr)
			}
		}
		return err
	}
	m.Record.Done = append(m.Record.Done, s.Name)
	m.Record.Running = ""
	if err := m.Save(ctx); err != nil {
		return err
	}
	m.log("step %s: done in %s", s.Name, m.now().Sub(start).Round(time.Second))
	if m.AfterStep != nil {
		return m.AfterStep(ctx, s.Name)
	}
	return nil
}

func (m *Machine) log(format string, args ...any) {
	if m.Log != nil {
		m.Log(format, args...)
	}
}

func (m *Machine) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}
