package machines

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrMachineFailed ends a wait for machines that one of them will never satisfy.
var ErrMachineFailed = errors.New("a machine failed for good and no health check replaces it")

// Settling is a wait until a cluster's machines have settled.
type Settling struct {
	Namespace, Name string
	// Version, when set, is the Kubernetes version every machine must be made for (a roll).
	Version  string
	Timeout  time.Duration
	Interval time.Duration
	// Progress, if set, is told at each look what the wait is for and what it still waits for.
	Progress func(what string, pending []string)
}

// WaitSettled waits until the cluster has the machines its definitions ask for, every one with a
// node whose Ready condition is true as the cluster's own API says (nodes: the cluster itself
// when it is self-managed), and, if s.Version is set, every one of that version.
func WaitSettled(ctx context.Context, c, nodes client.Reader, s Settling) (View, error) {
	var last []string
	var settled View
	err := wait.PollUntilContextTimeout(ctx, s.Interval, s.Timeout, true, func(ctx context.Context) (bool, error) {
		v, err := Read(ctx, c, s.Namespace, s.Name)
		if err == nil {
			err = v.CheckNodes(ctx, nodes)
		}
		if err != nil {
			last = []string{err.Error()}
			return false, nil
		}
		// A machine its provider gave up on, that no health check replaces, never settles:
		// say so now rather than at the timeout.
		if failed, err := Failed(ctx, c, s.Namespace, s.Name); err == nil {
			var lines []string
			for _, f := range Unreplaced(failed) {
				lines = append(lines, f.String())
			}
			if len(lines) > 0 {
				return false, fmt.Errorf("%w: %s", ErrMachineFailed, strings.Join(lines, "; "))
			}
		}
		ok, pending := v.Settled()
		older := 0
		for _, m := range v.Machines {
			if s.Version != "" && m.Version != s.Version {
				older++
			}
		}
		if ok && older == 0 {
			settled = v
			return true, nil
		}
		what := fmt.Sprintf("the %d machines of %s (%d now)", v.Wanted, s.Name, len(v.Machines))
		if s.Version != "" {
			what = fmt.Sprintf("the roll of %s to %s", s.Name, s.Version)
		}
		if older > 0 {
			pending = append([]string{fmt.Sprintf("%d of %d machines not at %s yet", older, len(v.Machines), s.Version)}, pending...)
		}
		last = pending
		if s.Progress != nil {
			s.Progress(what, pending)
		}
		return false, nil
	})
	if errors.Is(err, ErrMachineFailed) {
		return settled, fmt.Errorf("cluster %s: %w", s.Name, err)
	}
	if err != nil {
		if s.Version != "" {
			return settled, fmt.Errorf("cluster %s: not rolled to %s within %s: %v", s.Name, s.Version, s.Timeout, last)
		}
		return settled, fmt.Errorf("cluster %s: machines not ready within %s: %v", s.Name, s.Timeout, last)
	}
	return settled, nil
}
