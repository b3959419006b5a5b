package readiness

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/collector"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/event"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/kube"
)

// NotReady is an object that is not ready yet.
type NotReady struct {
	Object  string // Kind/namespace/name
	Status  status.Status
	Message string
}

// NotLookedAt is the message of an object the wait has not read yet.
const NotLookedAt = "not looked at yet"

// pollInterval is how often a wait looks at its objects.
const pollInterval = 2 * time.Second

// Wait waits until kstatus sees every object Current, calling report with the objects still
// pending whenever one changes. It fails as soon as one of them has Failed, or at the timeout with
// what was still pending. Errors reading an object (a busy API server, a CRD not served yet) are
// part of its status, not the end of the wait.
func Wait(ctx context.Context, c *kube.Cluster, objs []*unstructured.Unstructured, timeout time.Duration, report func([]NotReady)) error {
	if len(objs) == 0 {
		return nil
	}
	ids := object.UnstructuredSetToObjMetadataSet(objs)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	poller := polling.NewStatusPoller(c.Client, c.Mapper, polling.Options{})
	coll := collector.NewResourceStatusCollector(ids)
	var pending []NotReady
	var failed, observed bool
	var reported time.Time
	done := coll.ListenWithObserver(poller.Poll(ctx, ids, polling.PollOptions{PollInterval: pollInterval}),
		collector.ObserverFunc(func(rsc *collector.ResourceStatusCollector, _ event.Event) {
			pending, failed = pendingOf(rsc)
			observed = true
			// The collector calls for every object that changed: report once per round of polls.
			if report != nil && len(pending) > 0 && time.Since(reported) >= pollInterval {
				report(pending)
				reported = time.Now()
			}
			if len(pending) == 0 || failed {
				cancel()
			}
		}))
	<-done
	if coll.Error != nil && !errors.Is(coll.Error, context.Canceled) && !errors.Is(coll.Error, context.DeadlineExceeded) {
		return fmt.Errorf("%s cluster: %w", c.Name, coll.Error)
	}
	switch {
	case failed:
		return fmt.Errorf("%s cluster: failed: %s", c.Name, describe(pending, status.FailedStatus))
	case observed && len(pending) == 0:
		return nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && len(pending) > 0:
		return fmt.Errorf("%s cluster: still not ready after %s: %s", c.Name, timeout, describe(pending, ""))
	default:
		return fmt.Errorf("%s cluster: waiting for %d objects: %w", c.Name, len(ids), context.Cause(ctx))
	}
}

// pendingOf lists the objects not Current, and tells whether one has Failed.
func pendingOf(rsc *collector.ResourceStatusCollector) ([]NotReady, bool) {
	var out []NotReady
	failed := false
	for id, rs := range rsc.ResourceStatuses {
		p := NotReady{Object: utils.FmtObjMetadata(id), Status: status.UnknownStatus, Message: NotLookedAt}
		if rs != nil {
			if rs.Status == status.CurrentStatus {
				continue
			}
			p.Status = rs.Status
			switch {
			case rs.Error != nil:
				p.Message = rs.Error.Error()
			case rs.Message != "":
				p.Message = rs.Message
			case rs.Status == status.NotFoundStatus:
				p.Message = "not found"
			}
		}
		failed = failed || p.Status == status.FailedStatus
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	return out, failed
}

func describe(pending []NotReady, only status.Status) string {
	var parts []string
	for _, p := range pending {
		if only == "" || p.Status == only {
			parts = append(parts, fmt.Sprintf("%s (%s: %s)", p.Object, p.Status, p.Message))
		}
	}
	return strings.Join(parts, ", ")
}
