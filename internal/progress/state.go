// Package progress follows a bootstrap: it turns what it observes in the bootstrap cluster (the
// unit graph, the units' Flux Kustomizations, the Cluster API objects) into the state of every
// unit, and prints it: a tree redrawn in place on a terminal, timestamped lines otherwise, JSON
// for programs, and an HTML timeline at the end. When something is stuck it names the unit that
// blocks, what waits on it and why.
package progress

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/revisions"
	"cluster-init.dev/cluster-init/internal/termtext"
	"cluster-init.dev/cluster-init/internal/units"
)

// Unit is the observed state of one unit.
type Unit struct {
	Name      string          `json:"name"`
	State     readiness.State `json:"state"`
	Reason    string          `json:"reason,omitempty"`
	Message   string          `json:"message,omitempty"`
	DependsOn []string        `json:"depends_on,omitempty"`
	WaitingOn []string        `json:"waiting_on,omitempty"`
	Timeout   time.Duration   `json:"timeout"`
	Started   time.Time       `json:"started,omitzero"`
	Finished  time.Time       `json:"finished,omitzero"`
	// Since is when the unit's Kustomization entered its current condition, as the cluster
	// recorded it: what a one-time look (status) can tell, having not watched the unit.
	Since       time.Time `json:"since,omitzero"`
	Details     []string  `json:"details,omitempty"`
	Description string    `json:"description,omitempty"`
	// Help is what to look at when the unit blocks (the chart's info.help).
	Help string `json:"help,omitempty"`
	// Revision is the commit the unit's Kustomization last applied, and what its source fetched.
	Revision revisions.Revision `json:"revision,omitzero"`

	readyWhenSuspended bool
	// failing: the unit's last attempt failed and Flux retries it.
	failing bool
}

// Elapsed is how long the unit has been (or was) reconciling.
func (u Unit) Elapsed(now time.Time) time.Duration {
	switch {
	case u.Started.IsZero():
		return 0
	case !u.Finished.IsZero():
		return u.Finished.Sub(u.Started)
	default:
		return now.Sub(u.Started)
	}
}

// Snapshot is the state of a bootstrap at one moment.
type Snapshot struct {
	At      time.Time `json:"at"`
	Started time.Time `json:"started"`
	// Release describes the cluster-init HelmRelease while the units do not exist yet, and while
	// it fails (ReleaseFailing): its units then run what it rendered before.
	Release        string       `json:"release,omitempty"`
	ReleaseFailing bool         `json:"release_failing,omitempty"`
	Graph          *units.Graph `json:"-"`
	Units          []Unit       `json:"units"`
	// Revisions: the look read the units' revisions.
	Revisions bool `json:"-"`
}

// Unit returns the named unit, if observed.
func (s Snapshot) Unit(name string) (Unit, bool) {
	for _, u := range s.Units {
		if u.Name == name {
			return u, true
		}
	}
	return Unit{}, false
}

// Done tells whether a unit needs nothing more: ready, or suspended after being ready.
func (u Unit) Done() bool {
	return u.State == readiness.Ready || u.State == readiness.Suspended && !u.Finished.IsZero()
}

// Done tells whether every unit needs nothing more.
func (s Snapshot) Done() bool {
	ready, total := s.Counts()
	return total > 0 && ready == total
}

// Failed tells whether a unit has failed.
func (s Snapshot) Failed() bool {
	for _, u := range s.Units {
		if u.State == readiness.Failed {
			return true
		}
	}
	return false
}

// WithFailed is the snapshot with the unit of role marked failed for reason: what the cluster
// knows better than the unit's Kustomization (the pivot's record of a permanent failure).
func (s Snapshot) WithFailed(role, reason, message string) Snapshot {
	if s.Graph == nil {
		return s
	}
	gu, ok := s.Graph.ByRole(role)
	if !ok {
		return s
	}
	out := s
	out.Units = slices.Clone(s.Units)
	for i := range out.Units {
		if out.Units[i].Name == gu.Name {
			out.Units[i].State, out.Units[i].Reason, out.Units[i].Message = readiness.Failed, reason, message
		}
	}
	return out
}

// Counts returns how many units are done (see Done) out of all.
func (s Snapshot) Counts() (ready, total int) {
	for _, u := range s.Units {
		if u.Done() {
			ready++
		}
	}
	return ready, len(s.Units)
}

// Observed is what one look at a cluster found.
type Observed struct {
	readiness.Units
	// Release is the state of the cluster-init HelmRelease, shown until the units appear, and
	// beside them while it fails (ReleaseFailing).
	Release        string
	ReleaseFailing bool
	// Details are extra lines per unit (the Cluster API conditions and machines of the cluster unit).
	Details map[string][]string
	// Revisions are the units' revisions, when the look read them (status does; the live view
	// of a bootstrap does not).
	Revisions map[string]revisions.Revision
	// Cluster is the Cluster API cluster the release defines, its machines and health checks,
	// when the look read it (Source.ClusterName).
	Cluster machines.View
}

// Tracker turns successive observations into snapshots, remembering when each unit started and
// finished.
type Tracker struct {
	started  time.Time
	starts   map[string]time.Time
	finishes map[string]time.Time
}

// NewTracker starts tracking at start.
func NewTracker(start time.Time) *Tracker {
	return &Tracker{started: start, starts: map[string]time.Time{}, finishes: map[string]time.Time{}}
}

// Update computes the snapshot of an observation made at now.
func (t *Tracker) Update(obs Observed, now time.Time) Snapshot {
	snap := Snapshot{At: now, Started: t.started, Release: obs.Release, ReleaseFailing: obs.ReleaseFailing, Graph: obs.Graph, Revisions: obs.Revisions != nil}
	if obs.Graph == nil {
		return snap
	}
	done := map[string]bool{}
	for _, gu := range obs.Graph.Enabled() {
		timeout, _ := time.ParseDuration(gu.Timeout)
		u := Unit{Name: gu.Name, DependsOn: gu.DependsOn, Timeout: timeout, Description: gu.Description, Help: gu.Help, Details: obs.Details[gu.Name], Revision: obs.Revisions[gu.Name]}
		for _, d := range gu.DependsOn {
			if !done[d] {
				u.WaitingOn = append(u.WaitingOn, d)
			}
		}
		describe(&u, obs.Status(gu.Name))
		if u.State != readiness.Pending {
			if _, ok := t.starts[u.Name]; !ok {
				t.starts[u.Name] = now
			}
		}
		u.Started = t.starts[u.Name]
		if u.State == readiness.Ready || u.readyWhenSuspended {
			if _, ok := t.finishes[u.Name]; !ok {
				t.finishes[u.Name] = now
			}
		}
		// A unit suspended once ready (the pivot suspends the definitions' units) keeps its time.
		if u.State == readiness.Ready || u.State == readiness.Suspended {
			u.Finished = t.finishes[u.Name]
		}
		// Flux retries a unit that fails; it has failed for good once its timeout is spent.
		if u.State == readiness.Reconciling && u.failing && u.Timeout > 0 && u.Elapsed(now) >= u.Timeout {
			u.State = readiness.Failed
		}
		// What a unit waits for matters while it works on it: a unit waiting for its
		// dependencies, done or suspended shows none (two units share the cluster's lines).
		if u.State != readiness.Reconciling && u.State != readiness.Failed {
			u.Details = nil
		}
		done[u.Name] = u.Done()
		snap.Units = append(snap.Units, u)
	}
	return snap
}

// describe sets a unit's state from its status; a pending unit says what it waits for.
func describe(u *Unit, st readiness.Status) {
	u.State, u.Reason, u.Message, u.Since, u.readyWhenSuspended, u.failing = st.State, st.Reason, st.Message, st.Since, st.ReadyWhenSuspended, st.Failing
	if st.State == readiness.Pending && len(u.WaitingOn) > 0 {
		u.Message = "waiting for " + strings.Join(u.WaitingOn, ", ")
	}
}

// Conclusion explains why a bootstrap that did not finish is stuck.
type Conclusion struct {
	At time.Time
	// Blocking are the units that block: failed ones, else the ones that are not ready although
	// everything they need is.
	Blocking []Unit
	// Waiting maps a blocking unit to every unit that waits on it, directly or not.
	Waiting map[string][]string
}

// Conclude finds what blocks in the last snapshot.
func Conclude(s Snapshot) Conclusion {
	c := Conclusion{At: s.At, Waiting: map[string][]string{}}
	for _, u := range s.Units {
		if u.State == readiness.Failed {
			c.Blocking = append(c.Blocking, u)
		}
	}
	if len(c.Blocking) == 0 {
		for _, u := range s.Units {
			if !u.Done() && len(u.WaitingOn) == 0 {
				c.Blocking = append(c.Blocking, u)
			}
		}
	}
	for _, b := range c.Blocking {
		c.Waiting[b.Name] = s.Graph.DependsOnTransitively(b.Name)
	}
	return c
}

// String is the conclusion as shown to users, what came from the cluster escaped (termtext): a
// unit's message and each detail may span lines, whose continuations are indented deeper than
// the conclusion's own lines.
func (c Conclusion) String() string {
	if len(c.Blocking) == 0 {
		return "nothing blocks"
	}
	var b strings.Builder
	sort.SliceStable(c.Blocking, func(i, j int) bool { return c.Blocking[i].Name < c.Blocking[j].Name })
	for _, u := range c.Blocking {
		verb := "is not ready"
		if u.State == readiness.Failed {
			verb = "failed"
		}
		fmt.Fprintf(&b, "unit %s %s", termtext.Line(u.Name), verb)
		if !u.Started.IsZero() {
			fmt.Fprintf(&b, " after %s", u.Elapsed(c.At).Round(time.Second))
		}
		if u.Reason != "" {
			fmt.Fprintf(&b, ": %s", termtext.Line(u.Reason))
		}
		if u.Message != "" {
			fmt.Fprintf(&b, ": %s", termtext.Block(u.Message, "    "))
		}
		b.WriteString("\n")
		if w := c.Waiting[u.Name]; len(w) > 0 {
			fmt.Fprintf(&b, "  waiting on it: %s\n", termtext.Line(strings.Join(w, ", ")))
		}
		for _, d := range u.Details {
			fmt.Fprintf(&b, "  %s\n", termtext.Block(d, "      "))
		}
		if u.Help != "" {
			fmt.Fprintf(&b, "  what to look at: %s\n", termtext.Block(u.Help, "    "))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
