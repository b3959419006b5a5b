package cleanup

import (
	"testing"

	"cluster-init.dev/cluster-init/internal/records"
)

// Another kind cluster called "management" (its nodes carry the same label as CAPD's machines)
// is not this environment's: only the containers its clusters define are removed.
func TestOnlyTheEnvironmentsContainersAreRemoved(t *testing.T) {
	all := []Container{
		{"1", "management-control-plane-x9fsm", "management"},
		{"2", "management-workers-gqjkw-nzdpf", "management"},
		{"3", "management-lb", "management"},
		{"4", "management-control-plane", "management"}, // a kind cluster named management
		{"5", "management-worker", "management"},
		{"6", "wl1-md-abc", "wl1"},
		{"7", "other-control-plane", "other"},
	}
	owned := records.Owned{"management-control-plane-x9fsm": true, "management-workers-gqjkw-nzdpf": true, "management-lb": true, "wl1-md-abc": true, "other-control-plane": true}
	remove, foreign := choose(all, []string{"wl1", "management"}, owned)
	ids := func(cs []Container) (out []string) {
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	if got := ids(remove); len(got) != 4 || got[0] != "1" || got[1] != "2" || got[2] != "3" || got[3] != "6" {
		t.Errorf("removed %v, want 1 2 3 6", got)
	}
	if got := ids(foreign); len(got) != 2 || got[0] != "4" || got[1] != "5" {
		t.Errorf("left alone %v, want 4 5 (7 belongs to a cluster not cleaned)", got)
	}
	if _, foreign := choose(all, []string{"management"}, nil); len(foreign) != 5 {
		t.Errorf("with nothing known, %d containers are not left alone", 5-len(foreign))
	}
}
