package restore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/steps"
)

// tenantNamespaces are the tenants' namespaces the management cluster's release made.
func tenantNamespaces(ctx context.Context, m *kube.Cluster) ([]string, error) {
	list := &corev1.NamespaceList{}
	if err := m.Client.List(ctx, list, client.HasLabels{names.TenantLabel}); err != nil {
		return nil, fmt.Errorf("list the tenants' namespaces: %w", err)
	}
	var out []string
	for _, ns := range list.Items {
		out = append(out, ns.Name)
	}
	sort.Strings(out)
	return out, nil
}

// clusters are the restored clusters, namespace -> names, as the backup lists them.
func (r *restore) clusters() map[string][]string {
	out := map[string][]string{}
	for _, ns := range r.Backup.Namespaces(false) {
		if slices.Contains(r.rec.Namespaces, ns.Name) {
			out[ns.Name] = ns.Clusters
		}
	}
	return out
}

// takenBack waits until Cluster API runs each restored cluster again with the backup's machines,
// every one with its node, and checks that none was replaced: a replaced machine is a running
// one lost, which no new attempt undoes.
func (r *restore) takenBack(ctx context.Context) error {
	for ns, list := range r.clusters() {
		for _, name := range list {
			view, err := r.settled(ctx, ns, name)
			if err != nil {
				return err
			}
			before := map[string]string{}
			for _, m := range r.rec.Machines {
				// A machine without its provider ID yet was still coming up: nothing to compare.
				if m.Namespace == ns && m.Cluster == name && m.ProviderID != "" {
					before[m.Name] = m.ProviderID
				}
			}
			if replaced := machines.Replaced(before, view.ProviderIDs()); len(replaced) > 0 {
				return steps.Permanent(fmt.Errorf("cluster %s/%s: Cluster API replaced machines of the backup: %s", ns, name, strings.Join(replaced, ", ")))
			}
			r.Log("cluster %s/%s taken back: %d machines, none replaced", ns, name, len(view.Machines))
		}
	}
	return nil
}

// settled waits until the cluster's machines settle, with their nodes read from the cluster
// itself.
func (r *restore) settled(ctx context.Context, ns, name string) (machines.View, error) {
	var nodes client.Reader
	err := wait.PollUntilContextTimeout(ctx, r.Interval, r.StepTimeout, true, func(ctx context.Context) (bool, error) {
		w, err := kube.ClusterAPICluster(ctx, r.Management.Client, ns, name)
		if err != nil {
			r.waiting(fmt.Sprintf("the kubeconfig of %s/%s", ns, name), []string{err.Error()})
			return false, nil
		}
		nodes = w.Client
		return true, nil
	})
	if err != nil {
		return machines.View{}, fmt.Errorf("cluster %s/%s: no kubeconfig to read its nodes: %w", ns, name, err)
	}
	view, err := machines.WaitSettled(ctx, r.Management.Client, nodes, machines.Settling{Namespace: ns, Name: name,
		Timeout: r.StepTimeout, Interval: r.Interval, Progress: r.Waiting})
	if err != nil {
		return view, fmt.Errorf("cluster %s/%s: %w", ns, name, err)
	}
	return view, nil
}

func (r *restore) waiting(what string, pending []string) {
	if r.Waiting != nil {
		r.Waiting(what, pending)
	}
}

// release ends the hold: the release renders the tenants' directories unsuspended.
func (r *restore) release(ctx context.Context) error {
	st, _, err := managementstate.Read(ctx, r.Management.Client)
	if err != nil {
		return err
	}
	if !st.SelfManaged {
		return fmt.Errorf("the management cluster is %s: a restore needs a self-managed one", st)
	}
	return managementstate.Update(ctx, r.Management.Client, fieldOwner, func(st *managementstate.State) { st.HoldTenants = false })
}

// reconciledFromGit waits until each restored tenant's directory has reconciled from git (its
// committed clusters applied over the restored objects: git is the truth where they differ) and
// each restored cluster has settled again on what git asks for.
func (r *restore) reconciledFromGit(ctx context.Context) error {
	c := r.Management.Client
	r.rec.Orphans = nil
	var notInGit map[string]bool
	err := wait.PollUntilContextTimeout(ctx, r.Interval, r.StepTimeout, true, func(ctx context.Context) (bool, error) {
		var pending []string
		notInGit = map[string]bool{}
		for _, ns := range r.rec.Namespaces {
			ks := &kustomizev1.Kustomization{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.TenantKustomization}, ks); err != nil {
				pending = append(pending, fmt.Sprintf("Kustomization %s/%s: %v", ns, names.TenantKustomization, err))
				continue
			}
			if st := readiness.Of(ks); st.State != readiness.Ready || ks.Status.LastAppliedRevision == "" {
				pending = append(pending, fmt.Sprintf("Kustomization %s/%s: %s %s", ns, names.TenantKustomization, st.State, st.Message))
				continue
			}
			// The clusters' releases, made by the directory: each must have installed git's
			// values over the restored objects before the clusters settle on them.
			releases := &helmv2.HelmReleaseList{}
			if err := c.List(ctx, releases, client.InNamespace(ns)); err != nil {
				pending = append(pending, fmt.Sprintf("the HelmReleases of %s: %v", ns, err))
				continue
			}
			for i := range releases.Items {
				if st := readiness.Of(&releases.Items[i]); st.State != readiness.Ready {
					pending = append(pending, fmt.Sprintf("HelmRelease %s/%s: %s %s", ns, releases.Items[i].Name, st.State, st.Message))
				}
			}
			// The directory has applied its revision: a restored cluster with no release of its
			// name (the policy holds a release to its cluster's name) is no longer in git.
			for _, name := range r.clusters()[ns] {
				if !slices.ContainsFunc(releases.Items, func(hr helmv2.HelmRelease) bool { return hr.Name == name }) {
					notInGit[ns+"/"+name] = true
				}
			}
		}
		if len(pending) > 0 {
			r.waiting("the tenants' directories and their clusters' releases to reconcile from git", pending)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the tenants' directories did not reconcile from git within %s: %w", r.StepTimeout, err)
	}
	for ns, list := range r.clusters() {
		for _, name := range list {
			if notInGit[ns+"/"+name] {
				// Restored, running, and no longer committed: its deletion is the team's to ask.
				r.rec.Orphans = append(r.rec.Orphans, fmt.Sprintf("cluster %s/%s is restored but no longer in git: commit it again, or delete it (kubectl -n %s delete cluster %s)", ns, name, ns, name))
				continue
			}
			view, err := r.settled(ctx, ns, name)
			if err != nil {
				return err
			}
			r.Log("cluster %s/%s reconciled from git: %d machines", ns, name, len(view.Machines))
			orphans, err := r.nodesWithoutMachine(ctx, view)
			if err != nil {
				return err
			}
			r.rec.Orphans = append(r.rec.Orphans, orphans...)
		}
	}
	return nil
}

// nodesWithoutMachine are the nodes of a restored cluster that no machine has: made by the lost
// cluster after the backup was taken (a scale-up), they run on but nothing manages them. They
// are named, not removed.
func (r *restore) nodesWithoutMachine(ctx context.Context, view machines.View) ([]string, error) {
	w, err := kube.ClusterAPICluster(ctx, r.Management.Client, view.Namespace, view.Name)
	if err != nil {
		return nil, err
	}
	nodes := &corev1.NodeList{}
	if err := w.Client.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("list the nodes of %s/%s: %w", view.Namespace, view.Name, err)
	}
	ids := view.ProviderIDs()
	var out []string
	for _, n := range nodes.Items {
		if !slices.ContainsFunc(view.Machines, func(m machines.Machine) bool {
			return m.Node == n.Name || ids[m.Name] == n.Spec.ProviderID && n.Spec.ProviderID != ""
		}) {
			out = append(out, fmt.Sprintf("cluster %s/%s: node %s (provider ID %s) has no machine: the lost cluster made it after the backup", view.Namespace, view.Name, n.Name, n.Spec.ProviderID))
		}
	}
	return out, nil
}
