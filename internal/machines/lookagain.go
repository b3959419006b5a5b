package machines

import (
	"context"
	"errors"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeWait is how long a machine whose infrastructure is ready may wait for its node before its infrastructure
// provider is asked to look again, and how often it is asked.
const NodeWait = time.Minute

// LookAgainAnnotation is set on a machine's infrastructure object to ask its provider to look
// again; its value is when. Any change of the object makes its controller reconcile it at once.
const LookAgainAnnotation = "cluster-init.dev/look-again-at"

// AskToLookAgain asks the infrastructure provider of every machine of the cluster whose
// infrastructure has been ready for longer than NodeWait without a node to reconcile the machine again, at most once
// per NodeWait, and returns the machines it asked for.
//
// Why: the node of a machine gets its provider ID from the infrastructure provider (CAPD sets it
// itself: there is no cloud provider for Docker), which looks for the node once its machine is
// provisioned. While the new cluster's API server does not answer yet or the node has not
// registered, each look fails, and controller-runtime waits twice as long before each next one,
// up to 16 minutes; nothing else makes the provider look, since its machine is ready and does not
// change. A bootstrap then waits a quarter of an hour for a node that joined in seconds. Asking
// is an annotation: harmless to any provider, and the record of when it was last done, so that a
// second run of the CLI does not ask again sooner.
func AskToLookAgain(ctx context.Context, c client.Client, namespace, cluster string, now time.Time) ([]string, error) {
	list := &clusterv1.MachineList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return nil, fmt.Errorf("list the Machines of %s: %w", cluster, err)
	}
	keys, err := askToLookAgain(ctx, c, list, now)
	asked := make([]string, 0, len(keys))
	for _, k := range keys {
		asked = append(asked, k.Name)
	}
	return asked, err
}

// AskToLookAgainEverywhere is AskToLookAgain for every machine of every cluster: what the
// management cluster's own controller does (internal/controllers), so that a machine added by
// a commit, with no CLI running, does not wait out the provider's back-off either. It returns
// the machines it asked for.
func AskToLookAgainEverywhere(ctx context.Context, c client.Client, now time.Time) ([]client.ObjectKey, error) {
	list := &clusterv1.MachineList{}
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list the Machines: %w", err)
	}
	return askToLookAgain(ctx, c, list, now)
}

// askToLookAgain asks for every machine of list that waits for its node. A machine it cannot ask
// for (its infrastructure object gone, a kind it may not patch) is reported, and the others are
// still asked: one broken machine must not leave every other one waiting.
func askToLookAgain(ctx context.Context, c client.Client, list *clusterv1.MachineList, now time.Time) ([]client.ObjectKey, error) {
	var asked []client.ObjectKey
	var errs []error
	for _, m := range list.Items {
		if !waitsForItsNode(m, now) {
			continue
		}
		ok, err := askFor(ctx, c, m, now)
		if err != nil {
			errs = append(errs, err)
		} else if ok {
			asked = append(asked, client.ObjectKeyFromObject(&m))
		}
	}
	return asked, errors.Join(errs...)
}

// askFor annotates the infrastructure object of m, unless it was asked within NodeWait.
func askFor(ctx context.Context, c client.Client, m clusterv1.Machine, now time.Time) (bool, error) {
	ref := m.Spec.InfrastructureRef
	mapping, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if err != nil {
		return false, fmt.Errorf("find the API of %s %s of Machine %s/%s: %w", ref.Kind, ref.Name, m.Namespace, m.Name, err)
	}
	infra := &metav1.PartialObjectMetadata{}
	infra.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, infra); err != nil {
		return false, fmt.Errorf("read %s %s of Machine %s/%s: %w", ref.Kind, ref.Name, m.Namespace, m.Name, err)
	}
	if last, err := time.Parse(time.RFC3339, infra.GetAnnotations()[LookAgainAnnotation]); err == nil && now.Sub(last) < NodeWait {
		return false, nil
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, LookAgainAnnotation, now.UTC().Format(time.RFC3339))
	if err := c.Patch(ctx, infra, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return false, fmt.Errorf("ask the provider of Machine %s/%s to look again (annotate %s %s): %w", m.Namespace, m.Name, ref.Kind, ref.Name, err)
	}
	return true, nil
}

// waitsForItsNode: its infrastructure ready (the machine booted and bootstrapped) for longer than
// NodeWait, and no node yet. Not the phase: a machine is Provisioned as soon as it has a provider
// ID, while its bootstrap still runs.
func waitsForItsNode(m clusterv1.Machine, now time.Time) bool {
	infra := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
	return m.DeletionTimestamp.IsZero() &&
		m.Status.NodeRef.Name == "" &&
		m.Spec.InfrastructureRef.Name != "" &&
		infra != nil && infra.Status == metav1.ConditionTrue && now.Sub(infra.LastTransitionTime.Time) >= NodeWait
}
