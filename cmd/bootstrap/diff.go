package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/diff"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/termtext"
	"cluster-init.dev/cluster-init/internal/validate"
	"cluster-init.dev/cluster-init/internal/values"
	"cluster-init.dev/cluster-init/internal/workloads"
)

func newDiffCommand(g *globals) *cobra.Command {
	var kubeconfig, kubeContext, output string
	var tenants []string
	cmd := &cobra.Command{
		Use:   "diff ENV",
		Short: "Show what the checkout would change in the running management cluster: objects added, changed, removed",
		Long: `Compare the checkout with the environment's management cluster (or the one of --kubeconfig),
as ` + "`flux diff kustomization`" + ` does, for every unit, the cluster-init release and the tenants'
workload clusters: each object the checkout has a Flux Kustomization or HelmRelease apply is
applied in dry-run mode (server-side, as that controller) and compared with the cluster's; what
their inventories hold and the checkout no longer has is what Flux would remove. A Secret is named,
never shown. Units applied into workload clusters through a kubeconfig are not compared. It changes
nothing, and exits 0 whether or not there are changes (-o json for a pipeline to read).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: expected table or json", output)
			}
			checkouts, err := tenantCheckouts(tenants)
			if err != nil {
				return err
			}
			w, _, clusters, err := g.openClusters(args[0], kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			if len(clusters) == 0 {
				return fmt.Errorf("environment %s has no management cluster on this machine: give its --kubeconfig", w.env.Name)
			}
			// The management cluster once the pivot is done, else the bootstrap cluster.
			c := clusters[len(clusters)-1]
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			owners, skipped, err := w.diffOwners(ctx, c, checkouts)
			if err != nil {
				return err
			}
			report, err := diff.Compute(ctx, c.Client, owners, g.redactor.String)
			if err != nil {
				return fmt.Errorf("diff against the %s cluster (%s): %w", c.Name, c.Config.Host, err)
			}
			if output == "json" {
				return termtext.WriteJSON(cmd.OutOrStdout(), report, "  ")
			}
			writeDiff(cmd.OutOrStdout(), fmt.Sprintf("%s, %s cluster (%s)", w.env.Name, c.Name, c.Config.Host), report, skipped)
			return nil
		},
	}
	addKubeconfigFlags(cmd, &kubeconfig, &kubeContext, "the management cluster to compare with (a pipeline's: a kubeconfig file from a CI variable)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().StringArrayVar(&tenants, "tenant", nil, "NAMESPACE=DIR: a checkout of that tenant's own repository, compared too; repeatable")
	return cmd
}

// diffOwners renders the checkout as the management cluster c renders it (its recorded state) and
// groups the objects by the Flux object that applies them. skipped says what is not compared.
func (w *workspace) diffOwners(ctx context.Context, c *kube.Cluster, checkouts map[string]string) (owners []diff.Owner, skipped []string, err error) {
	opts := w.renderOptions(render.ContextManagement)
	// The release reads what bootstrap decided (the source, the --values files, the secrets'
	// revision) from ConfigMaps of the cluster: the same here, or every run would differ.
	if err := fromCluster(ctx, c.Client, &opts); err != nil {
		return nil, nil, err
	}
	st, found, err := managementstate.Read(ctx, c.Client)
	if err != nil {
		return nil, nil, fmt.Errorf("read the state of the %s cluster: %w", c.Name, err)
	}
	if found {
		opts.State = []values.Layer{st.Layer()}
	} else {
		for _, t := range validate.Targets() {
			if t.Context == render.ContextManagement && len(t.State) > 0 {
				opts.State = t.State // after the pivot: the release that runs there
			}
		}
	}
	r, err := w.renderer()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	res, err := r.Render(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("render the checkout's management cluster: %w", err)
	}

	byKey := map[string]*diff.Owner{}
	owner := func(kind, namespace, name, label string) *diff.Owner {
		key := kind + "/" + namespace + "/" + name
		if o, ok := byKey[key]; ok {
			return o
		}
		o := &diff.Owner{Kind: kind, Namespace: namespace, Name: name, Label: label}
		byKey[key] = o
		return o
	}
	units := map[string]string{} // unit -> its Kustomization
	for _, u := range res.Graph.Enabled() {
		if u.Kubeconfig {
			skipped = append(skipped, fmt.Sprintf("unit %s (applied into workload clusters)", u.Name))
			continue
		}
		units[u.Name] = u.Object
	}
	release, namespace := names.Release, names.Namespace
	for _, o := range res.Objects {
		var to *diff.Owner
		switch {
		case o.Unit == "" && o.Origin == render.UmbrellaChart:
			to = owner(diff.KindHelmRelease, namespace, release, "release "+release)
		case o.Unit == "":
			continue // applied by the bootstrap command, not from git
		case o.Release != nil:
			if _, ok := units[o.Unit]; !ok {
				continue
			}
			to = owner(diff.KindHelmRelease, o.Release.Namespace, o.Release.Name, fmt.Sprintf("unit %s, HelmRelease %s", o.Unit, o.Release.Name))
		default:
			ks, ok := units[o.Unit]
			if !ok {
				continue
			}
			to = owner(diff.KindKustomization, names.Namespace, ks, "unit "+o.Unit)
		}
		to.Desired = append(to.Desired, asApplied(o.Object))
	}

	plan, err := workloads.Read(ctx, w.root, res, checkouts)
	if err != nil {
		return nil, nil, fmt.Errorf("read the workload clusters of the checkout: %w", err)
	}
	for _, t := range plan.Tenants {
		if t.Checkout == "" {
			skipped = append(skipped, fmt.Sprintf("tenant %s (its repository %s: give --tenant %s=DIR)", t.Namespace, t.Repository, t.Namespace))
			continue
		}
		o := owner(diff.KindKustomization, t.Namespace, t.Kustomization.GetName(), "tenant "+t.Namespace)
		o.Desired = []*unstructured.Unstructured{}
	}
	for _, cl := range plan.Clusters {
		if cl.Tenant.Checkout == "" {
			continue
		}
		o := owner(diff.KindKustomization, cl.Tenant.Namespace, cl.Tenant.Kustomization.GetName(), "tenant "+cl.Tenant.Namespace)
		o.Desired = append(o.Desired, asApplied(cl.Release))
	}

	for _, o := range byKey {
		owners = append(owners, *o)
	}
	sort.Slice(owners, func(i, j int) bool { return owners[i].Label < owners[j].Label })
	return owners, skipped, nil
}

// asApplied is a rendered object as Flux applies it: without the annotations the render adds to
// say where it comes from.
func asApplied(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	ann := out.GetAnnotations()
	delete(ann, names.UnitAnnotation)
	delete(ann, names.OriginAnnotation)
	if len(ann) == 0 {
		ann = nil
	}
	out.SetAnnotations(ann)
	return out
}

// writeDiff prints a report, grouped by what applies the objects. Names and values come from
// the cluster and the checkouts (a tenant's): each is escaped on its line.
func writeDiff(out io.Writer, title string, r diff.Report, skipped []string) {
	fmt.Fprintf(out, "%s: %d changes, %d objects unchanged\n", termtext.Line(title), len(r.Changes), r.Unchanged)
	sign := map[diff.Action]string{diff.Added: "+", diff.Changed: "~", diff.Removed: "-"}
	owner := ""
	for _, ch := range r.Changes {
		if ch.Owner != owner {
			owner = ch.Owner
			fmt.Fprintf(out, "\n%s\n", termtext.Line(owner))
		}
		fmt.Fprintf(out, "  %s %s (%s)\n", sign[ch.Action], termtext.Line(ch.Object), ch.Action)
		for _, f := range ch.Fields {
			fmt.Fprintf(out, "      %s\n", termtext.Line(f))
		}
	}
	for _, n := range r.NotApplied {
		fmt.Fprintf(out, "\nnot in the cluster yet: %s (everything it holds is added)\n", termtext.Line(n))
	}
	for _, s := range skipped {
		fmt.Fprintf(out, "not compared: %s\n", termtext.Line(s))
	}
}

// fromCluster sets opts' source, overrides and secrets revision from the ConfigMaps bootstrap
// applied into the cluster (names.SourceConfigMap, names.OverridesConfigMap), where they exist.
func fromCluster(ctx context.Context, c client.Reader, opts *render.Options) error {
	read := func(name string) (values.Layer, bool, error) {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: name}, cm)
		if apierrors.IsNotFound(err) {
			return values.Layer{}, false, nil
		}
		if err != nil {
			return values.Layer{}, false, fmt.Errorf("read ConfigMap %s/%s: %w", names.Namespace, name, err)
		}
		l, err := values.ParseLayer(fmt.Sprintf("(ConfigMap %s/%s of the cluster)", names.Namespace, name), []byte(cm.Data[names.ValuesKey]), false)
		return l, err == nil, err
	}
	src, ok, err := read(names.SourceConfigMap)
	if err != nil {
		return err
	}
	if ok {
		merged := values.Merge(src)
		if s, isMap := merged["source"].(map[string]any); isMap {
			opts.Source = s
		}
		if r, isString := merged["secrets_revision"].(string); isString {
			opts.SecretsRevision = r
		}
	}
	overrides, ok, err := read(names.OverridesConfigMap)
	if err != nil {
		return err
	}
	if ok {
		opts.Overrides = []values.Layer{overrides}
	}
	return nil
}
