package standalone

import (
	"fmt"
	"time"

	"cluster-init.dev/cluster-init/internal/steps"
)

// Begin records in the state the change a command asks for (op: its command and what it asks,
// Started is set here), or finds the interrupted change it continues, and saves the state.
// temporaryExists says whether the temporary management cluster (st.BootstrapCluster) exists;
// it is asked only once the state alone has not refused the command.
// done: the change was complete and kept, only the temporary cluster is left to delete. notes are
// what the user should be told.
func (d Dir) Begin(st *State, op Operation, temporaryExists func() (bool, error), now time.Time) (done bool, notes []string, err error) {
	p := st.Pending
	if p != nil {
		switch {
		case p.Command == CommandCreate:
			return false, nil, fmt.Errorf("standalone cluster %s is still being created: run `bootstrap %s --standalone` again to finish", st.Cluster, st.Environment)
		case p.Command == CommandDelete && p.Began(StepChange) && op.Command != CommandDelete:
			return false, nil, fmt.Errorf("standalone cluster %s is being deleted (an interrupted `bootstrap delete %s`): run it again to finish", st.Cluster, st.Environment)
		}
		notes = append(notes, fmt.Sprintf("an interrupted `%s` of %s (started %s) is continued by this command", p.Command, st.Cluster, p.Started.Local().Format(time.DateTime)))
	}
	exists, err := temporaryExists()
	if err != nil {
		return false, notes, err
	}
	if p != nil && p.Command == CommandDelete && p.Began(StepChange) && !p.Complete() && p.IsDone(StepRestore) && !exists {
		// Restoring the last export would bring a half-deleted cluster back to life, and its
		// controllers could create machines before it is deleted again.
		return false, notes, fmt.Errorf("standalone cluster %s was being deleted and its temporary management cluster %s is gone: not restored from the state, which would bring the cluster back; remove its machines by hand (CAPD: the containers labelled io.x-k8s.kind.cluster=%s), then the state %s", st.Cluster, st.BootstrapCluster.Name, st.Cluster, d.Path)
	}
	if p == nil && exists {
		return false, notes, fmt.Errorf("kind cluster %s exists and no change of standalone cluster %s is under way: it is not one this command left; delete it (or change bootstrap_cluster.name) first", st.BootstrapCluster.Name, st.Cluster)
	}
	if p != nil && p.Complete() && p.Command == op.Command {
		return true, append(notes, "the change was complete and kept: only the temporary management cluster remains to delete"), nil
	}
	next := op
	next.Started, next.Record = now.UTC(), steps.Record{}
	if p != nil {
		next.Started = p.Started
		next.Attempts = p.Attempts
		// The temporary cluster that holds the restored objects holds the truth: they are not
		// restored again over it. What came after the restore is done again: the command may
		// differ, and a change made is made again at no cost.
		if p.IsDone(StepRestore) && exists {
			next.Done = []string{StepRestore}
		}
		if p.IsDone(StepRestore) && !exists {
			notes = append(notes, "warning: the temporary management cluster of the interrupted command is gone: the objects are restored from the state exported last")
		}
	} else {
		st.Before = st.Machines
	}
	st.Pending = &next
	return false, notes, d.Save(st)
}
