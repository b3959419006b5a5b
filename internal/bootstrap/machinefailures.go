package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/cloudfault"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/units"
)

// machineFailures follows the machines that their infrastructure provider gave up on. Such a
// machine is never retried: without a health check that replaces it, the cluster's unit would
// wait out its whole timeout for a machine that will not come. Each failure is said once, with
// what its cloud says about it (asked once: the cloud's answer does not change).
type machineFailures struct {
	c                  client.Reader
	namespace, cluster string
	said               map[string]said // by machine
}

// said is what was said of a failed machine, and whether a health check was to replace it then.
type said struct {
	line     string
	replaced bool
}

func newMachineFailures(c client.Reader, namespace, cluster string) *machineFailures {
	return &machineFailures{c: c, namespace: namespace, cluster: cluster, said: map[string]said{}}
}

// look logs each new failure (and one whose replacement changed) and returns what ends the
// cluster's unit: the failures no health check will replace, one line each.
func (m *machineFailures) look(ctx context.Context, log func(string, ...any)) ([]string, error) {
	failed, err := machines.Failed(ctx, m.c, m.namespace, m.cluster)
	if err != nil {
		return nil, err
	}
	var terminal []string
	for _, f := range failed {
		before, seen := m.said[f.Machine]
		now := said{line: before.line, replaced: f.RemediatedBy != ""}
		if !seen || before.replaced != now.replaced {
			now.line = f.String()
			if fault, err := cloudfault.Ask(ctx, m.c, f.Object); err == nil {
				now.line += "; " + fault.String()
			} else if !errors.Is(err, cloudfault.ErrNotKnown) {
				now.line += fmt.Sprintf("; its cloud could not be asked why: %v", err)
			}
			m.said[f.Machine] = now
			log("%s", now.line)
		}
		if !now.replaced {
			terminal = append(terminal, now.line)
		}
	}
	return terminal, nil
}

// withMachinesFailed marks the unit that waits for the cluster as failed, for the lines of the
// machines that failed for good.
func withMachinesFailed(snap progress.Snapshot, lines []string) progress.Snapshot {
	msg := strings.Join(lines, "\n")
	for _, role := range []string{units.RoleClusterReady, units.RoleCluster} {
		if snap.Graph == nil {
			break
		}
		if _, ok := snap.Graph.ByRole(role); ok {
			return snap.WithFailed(role, "MachineFailed", msg)
		}
	}
	return snap
}
