package standalone

import "fmt"

// Hold is what `bootstrap cleanup` holds of an environment's standalone state while it runs.
type Hold struct {
	dir  Dir
	lock *Lock
}

// HoldForCleanup decides what a cleanup of the environment may do with its standalone state,
// under root: nothing to hold when there is none (nil); an interrupted creation, whose bootstrap
// cluster still manages the cluster, is held, and removed once the cleanup has removed the rest;
// anything else is refused, since the state is then the only record of a running cluster and only
// `bootstrap delete` removes it (through Cluster API, which it brings back).
func HoldForCleanup(root, env string) (*Hold, error) {
	d, err := DirOf(root, env)
	if err != nil {
		return nil, nil // no state can exist under a name that is not one
	}
	if exists, _ := d.Exists(); !exists {
		return nil, nil
	}
	lock, err := d.Lock("bootstrap cleanup " + env)
	if err != nil {
		return nil, err
	}
	st, err := d.Load()
	if err != nil {
		lock.Release()
		return nil, fmt.Errorf("%s may have a standalone cluster, its state unreadable (%w): cleanup leaves it; repair the state or remove it by hand", env, err)
	}
	if st.Pending == nil || st.Pending.Command != CommandCreate || st.Pending.Complete() {
		lock.Release()
		return nil, fmt.Errorf("%s has a standalone cluster (%s, state %s): `bootstrap delete %s` deletes it and its machines through Cluster API", env, st.Cluster, d.Path, env)
	}
	return &Hold{dir: d, lock: lock}, nil
}

// Release lets the state go: removed if the cleanup removed everything else (cleaned), kept
// otherwise. A nil Hold holds nothing.
func (h *Hold) Release(cleaned bool) error {
	if h == nil {
		return nil
	}
	defer h.lock.Release()
	if !cleaned {
		return nil
	}
	return h.dir.Remove()
}
