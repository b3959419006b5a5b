package pivot

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cluster-init.dev/cluster-init/internal/steps"
)

// Permanent marks err as a failure no retry of the pivot can fix: it is recorded, and every later
// attempt stops at once with it.
func Permanent(err error) error { return steps.Permanent(err) }

// IsPermanent tells whether err is (or wraps) a permanent failure.
func IsPermanent(err error) bool { return steps.IsPermanent(err) }

// Store keeps the pivot's record.
type Store interface {
	Load(ctx context.Context) (State, error)
	Save(ctx context.Context, st State) error
}

// attempt is one run of the pivot: the steps not done yet (steps.Machine), then finish with the
// record marked complete, then the record saved.
type attempt struct {
	store Store
	// stepsOf are the steps, which record what they learn for later steps in st.
	stepsOf func(st *State) []steps.Step
	log     func(format string, args ...any)
	// afterStep, if set, runs after a step is recorded done (a test's way to stop the pivot there).
	afterStep func(ctx context.Context, step string) error
	now       func() time.Time
}

func (a *attempt) run(ctx context.Context, finish func(context.Context, State) error) error {
	st, err := a.store.Load(ctx)
	if err != nil {
		return err
	}
	m := &steps.Machine{
		Record: &st.Record, Save: func(ctx context.Context) error { return a.store.Save(ctx, st) },
		What: "pivot", Log: a.log, AfterStep: a.afterStep, Now: a.now,
	}
	if err := m.Run(ctx, a.stepsOf(&st)); err != nil {
		return err
	}
	if st.Completed == nil {
		now := metav1.NewTime(a.now())
		st.Completed = &now
	}
	if err := finish(ctx, st); err != nil {
		return err
	}
	if err := a.store.Save(ctx, st); err != nil {
		return err
	}
	a.log("pivot complete after %d attempts", st.Attempts)
	return nil
}
