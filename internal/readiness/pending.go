package readiness

import (
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
)

// Lines says what a wait still waits for, a line per object it has looked at and one line for
// those it has not (the first poll reaches few objects: one line for the rest, not one each).
func Lines(pending []NotReady) []string {
	var list []string
	unseen := 0
	for _, p := range pending {
		if p.Status == status.UnknownStatus && p.Message == NotLookedAt {
			unseen++
			continue
		}
		list = append(list, fmt.Sprintf("%s: %s", p.Object, p.Message))
	}
	if unseen > 0 {
		list = append(list, fmt.Sprintf("%d objects not looked at yet", unseen))
	}
	return list
}
