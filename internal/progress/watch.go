package progress

import (
	"context"
	"fmt"
	"sort"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/units"
)

// Source says where to look for a release's units.
type Source struct {
	Cluster   *kube.Cluster
	Namespace string
	Release   string
	// ClusterName is the Cluster API cluster whose conditions and machines are shown under the
	// unit ClusterUnit while it reconciles.
	ClusterName string
	ClusterUnit string
}

// Observe polls the cluster once.
func (s Source) Observe(ctx context.Context) (Observed, error) {
	obs := Observed{Kustomizations: map[string]*kustomizev1.Kustomization{}, Details: map[string][]string{}}
	c := s.Cluster.Client

	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: units.ConfigMapName}, cm)
	switch {
	case err == nil:
		if obs.Graph, err = units.FromData(cm.Data); err != nil {
			return obs, err
		}
	case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
	default:
		return obs, fmt.Errorf("read the unit graph: %w", err)
	}

	hr := &helmv2.HelmRelease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Release}, hr); err == nil {
		obs.Release = describeCondition(hr.Status.Conditions, "release "+s.Release)
	} else if !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err) {
		return obs, fmt.Errorf("read HelmRelease %s: %w", s.Release, err)
	} else {
		obs.Release = "release " + s.Release + ": not created yet"
	}

	list := &kustomizev1.KustomizationList{}
	if err := c.List(ctx, list, client.InNamespace(s.Namespace)); err != nil && !apimeta.IsNoMatchError(err) {
		return obs, fmt.Errorf("list Kustomizations: %w", err)
	}
	for i := range list.Items {
		obs.Kustomizations[list.Items[i].Name] = &list.Items[i]
	}

	if s.ClusterName != "" {
		details, err := clusterDetails(ctx, c, s.Namespace, s.ClusterName)
		if err != nil {
			return obs, err
		}
		obs.Details[s.ClusterUnit] = details
	}
	return obs, nil
}

func describeCondition(conds []metav1.Condition, what string) string {
	ready := apimeta.FindStatusCondition(conds, meta.ReadyCondition)
	if ready == nil {
		return what + ": not reconciled yet"
	}
	if ready.Status == "True" {
		return what + ": ready"
	}
	return fmt.Sprintf("%s: %s: %s", what, ready.Reason, ready.Message)
}

// clusterDetails describes a Cluster API cluster while it comes up: its conditions that are not
// true yet, and every machine with its phase.
func clusterDetails(ctx context.Context, c client.Client, namespace, name string) ([]string, error) {
	cl := &clusterv1.Cluster{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cl)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Cluster %s: %w", name, err)
	}
	var out []string
	var notTrue []string
	for _, cond := range cl.Status.Conditions {
		if cond.Status != "True" && !strings.HasSuffix(cond.Type, "Deleting") && cond.Type != "Paused" && cond.Type != "RollingOut" && cond.Type != "ScalingDown" && cond.Type != "ScalingUp" && cond.Type != "Remediating" {
			msg := cond.Reason
			if cond.Message != "" {
				msg += ": " + firstLine(cond.Message)
			}
			notTrue = append(notTrue, fmt.Sprintf("%s=%s (%s)", cond.Type, cond.Status, msg))
		}
	}
	phase := cl.Status.Phase
	if phase == "" {
		phase = "Pending"
	}
	line := fmt.Sprintf("Cluster %s: %s", name, phase)
	if len(notTrue) > 0 {
		line += "; " + strings.Join(notTrue, "; ")
	}
	out = append(out, line)

	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return nil, fmt.Errorf("list Machines of %s: %w", name, err)
	}
	sort.Slice(machines.Items, func(i, j int) bool { return machines.Items[i].Name < machines.Items[j].Name })
	for _, m := range machines.Items {
		role := "worker"
		if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
			role = "control plane"
		}
		line := fmt.Sprintf("Machine %s (%s): %s", m.Name, role, m.Status.Phase)
		if m.Status.NodeRef.Name != "" {
			line += ", node " + m.Status.NodeRef.Name
		}
		if ready := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition); ready != nil && ready.Status != "True" && ready.Message != "" {
			line += "; " + firstLine(ready.Message)
		}
		out = append(out, line)
	}
	return out, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return strings.TrimPrefix(s, "* ")
}
