// Package progress follows a bootstrap: it turns what it observes in the bootstrap cluster (the
// unit graph, the units' Flux Kustomizations, the Cluster API objects) into the state of every
// unit, and prints it: a tree redrawn in place on a terminal, timestamped lines otherwise, JSON
// for programs, and an HTML timeline at the end. When something is stuck it names the unit that
// blocks, what waits on it and why.
package progress

import (
	"fmt"
	"sort"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"cluster-init.dev/cluster-init/internal/units"
)

// State of a unit.
type State string

// The states a unit goes through.
const (
	Pending     State = "pending"     // its Kustomization does not exist yet, or waits for dependencies
	Reconciling State = "reconciling" // Flux applies it or waits for its health checks
	Ready       State = "ready"
	Failed      State = "failed" // not ready within its timeout, or stalled
	Suspended   State = "suspended"
)

// Unit is the observed state of one unit.
type Unit struct {
	Name      string        `json:"name"`
	State     State         `json:"state"`
	Reason    string        `json:"reason,omitempty"`
	Message   string        `json:"message,omitempty"`
	DependsOn []string      `json:"depends_on,omitempty"`
	WaitingOn []string      `json:"waiting_on,omitempty"`
	Timeout   time.Duration `json:"timeout"`
	Started   time.Time     `json:"started,omitzero"`
	Finished  time.Time     `json:"finished,omitzero"`
	// Since is when the unit's Kustomization entered its current condition, as the cluster
	// recorded it: what a one-time look (status) can tell, having not watched the unit.
	Since       time.Time `json:"since,omitzero"`
	Details     []string  `json:"details,omitempty"`
	Description string    `json:"description,omitempty"`

	readyBeforeSuspend bool
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
	// Release describes the cluster-init HelmRelease while the units do not exist yet.
	Release string       `json:"release,omitempty"`
	Graph   *units.Graph `json:"-"`
	Units   []Unit       `json:"units"`
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
	return u.State == Ready || u.State == Suspended && !u.Finished.IsZero()
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

// Observed is what one poll of the bootstrap cluster found.
type Observed struct {
	Graph          *units.Graph
	Kustomizations map[string]*kustomizev1.Kustomization
	// Release is the state of the cluster-init HelmRelease, shown until the units appear.
	Release string
	// Details are extra lines per unit (the Cluster API conditions and machines of the cluster unit).
	Details map[string][]string
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
	snap := Snapshot{At: now, Started: t.started, Release: obs.Release, Graph: obs.Graph}
	if obs.Graph == nil {
		return snap
	}
	done := map[string]bool{}
	for _, gu := range obs.Graph.Enabled() {
		timeout, _ := time.ParseDuration(gu.Timeout)
		u := Unit{Name: gu.Name, DependsOn: gu.DependsOn, Timeout: timeout, Description: gu.Description, Details: obs.Details[gu.Name]}
		for _, d := range gu.DependsOn {
			if !done[d] {
				u.WaitingOn = append(u.WaitingOn, d)
			}
		}
		classify(&u, obs.Kustomizations[gu.Name])
		if u.State != Pending {
			if _, ok := t.starts[u.Name]; !ok {
				t.starts[u.Name] = now
			}
		}
		u.Started = t.starts[u.Name]
		if u.State == Ready || u.readyBeforeSuspend {
			if _, ok := t.finishes[u.Name]; !ok {
				t.finishes[u.Name] = now
			}
		}
		// A unit suspended once ready (the pivot suspends the definitions' units) keeps its time.
		if u.State == Ready || u.State == Suspended {
			u.Finished = t.finishes[u.Name]
		}
		// Flux retries a unit that fails; it has failed for good once its timeout is spent.
		if u.State == Reconciling && u.Reason != meta.ProgressingReason && u.Reason != "" &&
			u.Timeout > 0 && u.Elapsed(now) >= u.Timeout {
			u.State = Failed
		}
		done[u.Name] = u.Done()
		snap.Units = append(snap.Units, u)
	}
	return snap
}

// classify sets the state, reason and message of a unit from its Kustomization.
func classify(u *Unit, ks *kustomizev1.Kustomization) {
	if ks == nil {
		u.State = Pending
		if len(u.WaitingOn) > 0 {
			u.Message = "waiting for " + strings.Join(u.WaitingOn, ", ")
		} else {
			u.Message = "waiting for the cluster-init release to create it"
		}
		return
	}
	if ks.Spec.Suspend {
		u.State, u.Reason, u.Message = Suspended, "Suspended", "reconciliation suspended"
		if ready := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition); ready != nil && ready.Status == "True" {
			u.Message = "suspended once ready"
			u.readyBeforeSuspend = true
		}
		return
	}
	if stalled := apimeta.FindStatusCondition(ks.Status.Conditions, meta.StalledCondition); stalled != nil && stalled.Status == "True" {
		u.State, u.Reason, u.Message = Failed, stalled.Reason, stalled.Message
		u.Since = stalled.LastTransitionTime.Time
		return
	}
	ready := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition)
	if ready != nil {
		u.Since = ready.LastTransitionTime.Time
	}
	switch {
	case ready == nil:
		u.State, u.Message = Reconciling, "not reconciled yet"
	case ready.Status == "True" && ks.Status.ObservedGeneration == ks.Generation:
		u.State, u.Reason, u.Message = Ready, ready.Reason, ready.Message
	case ready.Reason == meta.DependencyNotReadyReason:
		u.State, u.Reason = Pending, ready.Reason
		u.Message = "waiting for " + strings.Join(u.WaitingOn, ", ")
		if len(u.WaitingOn) == 0 {
			u.Message = ready.Message
		}
	default:
		u.State, u.Reason, u.Message = Reconciling, ready.Reason, ready.Message
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
		if u.State == Failed {
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
		c.Waiting[b.Name] = dependents(s, b.Name)
	}
	return c
}

// dependents returns every unit that depends on name, directly or transitively, in order.
func dependents(s Snapshot, name string) []string {
	waiting := map[string]bool{name: true}
	var out []string
	for _, u := range s.Units { // the order puts dependencies first
		for _, d := range u.DependsOn {
			if waiting[d] && !waiting[u.Name] {
				waiting[u.Name] = true
				out = append(out, u.Name)
			}
		}
	}
	return out
}

// String is the conclusion as shown to users.
func (c Conclusion) String() string {
	if len(c.Blocking) == 0 {
		return "nothing blocks"
	}
	var b strings.Builder
	sort.SliceStable(c.Blocking, func(i, j int) bool { return c.Blocking[i].Name < c.Blocking[j].Name })
	for _, u := range c.Blocking {
		verb := "is not ready"
		if u.State == Failed {
			verb = "failed"
		}
		fmt.Fprintf(&b, "unit %s %s", u.Name, verb)
		if !u.Started.IsZero() {
			fmt.Fprintf(&b, " after %s", u.Elapsed(c.At).Round(time.Second))
		}
		if u.Reason != "" {
			fmt.Fprintf(&b, ": %s", u.Reason)
		}
		if u.Message != "" {
			fmt.Fprintf(&b, ": %s", u.Message)
		}
		b.WriteString("\n")
		if w := c.Waiting[u.Name]; len(w) > 0 {
			fmt.Fprintf(&b, "  waiting on it: %s\n", strings.Join(w, ", "))
		}
		for _, d := range u.Details {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
