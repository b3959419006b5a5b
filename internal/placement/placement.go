// Package placement places applications on the clusters of a management cluster: an Application
// (apps.cluster-init.dev/v1alpha1) names a path of a Flux source and where it runs, a list of
// clusters or a label selector over the Cluster API Clusters; for each cluster it runs on, one
// Flux Kustomization applies the path through that cluster's kubeconfig, and Flux does the rest
// (build, server-side apply, health checks, pruning). What Flux cannot do is done here, and only
// that (docs/placement.md says why it needs a controller at all):
//
//   - resolve the placement against the Clusters that exist now (a selector, names, clusters that
//     are missing or being deleted);
//   - move make-before-break: a cluster that leaves the placement keeps the application until every
//     cluster of the new placement runs it, then its Kustomization is deleted and Flux prunes what it
//     applied there;
//   - sum the status back: the Application is Ready only when every cluster of its placement is,
//     and its message names the ones that are not, and the clusters that do not exist.
package placement

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
	"cluster-init.dev/cluster-init/internal/fluxobjects"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/readiness"
)

const (
	// ApplicationLabel marks the Flux objects of an application: "<namespace>.<name>".
	ApplicationLabel = "apps.cluster-init.dev/application"
	// ClusterLabel is the name of the Cluster a Flux object runs the application on (the object is
	// in the Cluster's namespace), for people selecting them; the controller reads the cluster
	// from the kubeconfig the object applies through (placedOn).
	ClusterLabel = "apps.cluster-init.dev/cluster"
	// Finalizer keeps an Application until its Kustomizations, in the clusters' namespaces (no
	// owner reference reaches there), are deleted.
	Finalizer  = "apps.cluster-init.dev/placements"
	fieldOwner = "cluster-init-placement"
)

// Reconciler reconciles Applications in the management cluster.
type Reconciler struct {
	Client client.Client
	// RequeueAfter is how often an application whose placements are not all ready is looked at
	// again, besides the watches.
	RequeueAfter time.Duration
	Rules        Rules
	// indexed: Client reads from a cache whose Flux objects are indexed by application
	// (IndexPlacedObjects).
	indexed bool
}

// Rules are where the platform lets applications run (the values' `applications`). Tenants
// create Clusters and label them: a tenant's cluster is chosen only by its full name, or by a
// selector where the platform named its namespace, so that a tenant cannot draw the platform's
// applications (and what they carry) onto its clusters, nor take another cluster's place.
type Rules struct {
	// Management is the management cluster's own Cluster; OnManagement, whether applications
	// may run on it.
	Management   client.ObjectKey
	OnManagement bool
	// SelectorNamespaces are the namespaces, besides the application's own, whose Clusters a
	// selector may match.
	SelectorNamespaces []string
}

// Key is the Cluster a name of placement.clusters means: namespace/name, or a name alone in the
// application's namespace (never a match in whatever namespace has one).
func Key(appNamespace, name string) client.ObjectKey {
	if ns, n, ok := strings.Cut(name, "/"); ok {
		return client.ObjectKey{Namespace: ns, Name: n}
	}
	return client.ObjectKey{Namespace: appNamespace, Name: name}
}

// Refuses says why an application may not run on a cluster, "" if it may.
func (r Rules) Refuses(cluster client.ObjectKey) string {
	if cluster == r.Management && !r.OnManagement {
		return "applications do not run on the management cluster here (values: applications.on_management is false)"
	}
	return ""
}

// selects says whether a selector may match the Clusters of a namespace.
func (r Rules) selects(appNamespace, namespace string) bool {
	return namespace == appNamespace || slices.Contains(r.SelectorNamespaces, namespace)
}

// target is a cluster an application is wanted on.
type target struct {
	key     client.ObjectKey // the Cluster
	missing string           // why it cannot be placed there, if it cannot
}

// clusterName is how the status names a cluster: namespace/name, or the name as written when no
// such Cluster exists.
func clusterName(k client.ObjectKey) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// Reconcile brings one Application's Flux objects and status in line with its placement.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	app := &appsv1alpha1.Application{}
	if err := r.Client.Get(ctx, req.NamespacedName, app); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	appID := applicationID(app)
	if errs := validation.IsValidLabelValue(appID); len(errs) > 0 {
		// Its Flux objects could not be labelled, listed or found again: nothing is placed.
		return r.writeStatus(ctx, app, appsv1alpha1.ApplicationStatus{Conditions: []metav1.Condition{condition(app, metav1.ConditionFalse, "InvalidName",
			fmt.Sprintf("namespace and name %q make no label value: %s", appID, strings.Join(errs, "; ")))}})
	}
	existing, err := r.placedObjects(ctx, appID)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !app.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, app, existing)
	}
	if !controllerutil.ContainsFinalizer(app, Finalizer) {
		controllerutil.AddFinalizer(app, Finalizer)
		if err := r.Client.Update(ctx, app); err != nil {
			return reconcile.Result{}, fmt.Errorf("add the finalizer of application %s: %w", req, err)
		}
	}
	targets, err := r.resolve(ctx, app.Namespace, app.Spec.Placement)
	if err != nil {
		return r.writeStatus(ctx, app, appsv1alpha1.ApplicationStatus{Conditions: []metav1.Condition{condition(app, metav1.ConditionFalse, "InvalidPlacement", err.Error())}})
	}

	var st appsv1alpha1.ApplicationStatus
	p, err := r.place(ctx, app, targets, existing)
	if err != nil {
		return reconcile.Result{}, err
	}
	st.Placements = p.placements
	left, err := r.removeLeft(ctx, appID, existing, p, len(targets))
	if err != nil {
		return reconcile.Result{}, err
	}
	st.Placements = append(st.Placements, left...)
	sort.SliceStable(st.Placements, func(i, j int) bool { return st.Placements[i].Cluster < st.Placements[j].Cluster })
	st.Conditions = []metav1.Condition{summed(app, st.Placements)}
	res, err := r.writeStatus(ctx, app, st)
	if err == nil && st.Conditions[0].Status != metav1.ConditionTrue {
		res.RequeueAfter = r.RequeueAfter
	}
	return res, err
}

// placing is what placing an application on its targets did.
type placing struct {
	placements []appsv1alpha1.PlacementStatus
	wanted     map[client.ObjectKey]string // the Flux objects that run the application, and their kinds
	renamed    map[placedKind]bool         // the clusters and kinds of the wanted objects: another object of both is of an older name
	allReady   bool
	anyPlaced  bool
}

// place applies the application's Flux object for each target cluster it can run on.
func (r *Reconciler) place(ctx context.Context, app *appsv1alpha1.Application, targets []target, existing []client.Object) (placing, error) {
	p := placing{wanted: map[client.ObjectKey]string{}, renamed: map[placedKind]bool{}, allReady: true}
	for _, t := range targets {
		if t.missing != "" {
			p.placements = append(p.placements, appsv1alpha1.PlacementStatus{Cluster: clusterName(t.key), State: appsv1alpha1.StateMissing, Message: t.missing})
			continue
		}
		p.anyPlaced = true
		obj, refused, err := r.apply(ctx, app, t.key)
		if err != nil {
			return p, err
		}
		if refused != "" {
			p.allReady = false
			p.placements = append(p.placements, appsv1alpha1.PlacementStatus{Cluster: clusterName(t.key), State: appsv1alpha1.StateFailed, Message: refused})
			// What runs the application there now stays, and is not shown as leaving.
			for _, o := range existing {
				if placedOn(o) == t.key {
					p.wanted[client.ObjectKeyFromObject(o)] = o.GetObjectKind().GroupVersionKind().Kind
				}
			}
			continue
		}
		p.wanted[client.ObjectKeyFromObject(obj)] = obj.GetObjectKind().GroupVersionKind().Kind
		p.renamed[placedKind{t.key, obj.GetObjectKind().GroupVersionKind().Kind}] = true
		ps := placementOf(obj)
		ps.Cluster = clusterName(t.key)
		p.allReady = p.allReady && ps.State == appsv1alpha1.StateReady
		p.placements = append(p.placements, ps)
	}
	return p, nil
}

// removeLeft removes the Flux objects of the clusters that left the placement, make-before-break:
// once the new placement runs everywhere, never while nothing of it exists (a typo must not leave
// no instance); until then they are shown as leaving.
func (r *Reconciler) removeLeft(ctx context.Context, appID string, existing []client.Object, p placing, targets int) ([]appsv1alpha1.PlacementStatus, error) {
	var out []appsv1alpha1.PlacementStatus
	removable := p.allReady && (p.anyPlaced || targets == 0)
	for _, o := range existing {
		// Still wanted, in the same form (manifests or chart): not leaving. An object of an older
		// name (before names carried a hash) is replaced like a cluster that left.
		kind := o.GetObjectKind().GroupVersionKind().Kind
		if p.wanted[client.ObjectKeyFromObject(o)] == kind {
			continue
		}
		cluster := clusterName(placedOn(o))
		if !removable {
			out = append(out, appsv1alpha1.PlacementStatus{Cluster: cluster, State: appsv1alpha1.StateRemoving, Message: "left the placement: kept until the new placement is ready"})
			continue
		}
		// An object of an older name on a cluster that keeps the application in the same form
		// runs the same release, or applied the objects the new one owns now: suspended first,
		// Flux neither uninstalls nor prunes it when it goes.
		if p.renamed[placedKind{placedOn(o), kind}] {
			if err := fluxobjects.Suspend(ctx, r.Client, o); err != nil {
				return nil, fmt.Errorf("remove the older %s of application %s from %s: %w", kind, appID, cluster, err)
			}
		}
		if err := r.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("remove application %s from %s: %w", appID, cluster, err)
		}
		out = append(out, appsv1alpha1.PlacementStatus{Cluster: cluster, State: appsv1alpha1.StateRemoving, Message: "left the placement: being removed"})
	}
	return out, nil
}

// applicationID is the value of ApplicationLabel for an application.
func applicationID(app *appsv1alpha1.Application) string { return app.Namespace + "." + app.Name }

// placedKind is a cluster and the kind of Flux object that runs an application there.
type placedKind struct {
	cluster client.ObjectKey
	kind    string
}

// kubeconfigSecret is the Secret with the kubeconfig Cluster API writes for a cluster, in its
// namespace.
func kubeconfigSecret(cluster string) string { return cluster + "-kubeconfig" }

// placedOn is the Cluster a Flux object of an application runs it on: the one whose kubeconfig
// it applies through (whatever its name and labels, which changed over time).
func placedOn(o client.Object) client.ObjectKey {
	var ref *meta.KubeConfigReference
	switch f := o.(type) {
	case *kustomizev1.Kustomization:
		ref = f.Spec.KubeConfig
	case *helmv2.HelmRelease:
		ref = f.Spec.KubeConfig
	}
	name := ""
	if ref != nil && ref.SecretRef != nil {
		name = strings.TrimSuffix(ref.SecretRef.Name, kubeconfigSecret(""))
	}
	return client.ObjectKey{Namespace: o.GetNamespace(), Name: name}
}

// resolve turns a placement into clusters: each named one (found or not) and each the selector
// matches in the namespaces it may look at, in a stable order; the rules' refusals are missing
// clusters with their reason.
func (r *Reconciler) resolve(ctx context.Context, appNamespace string, p appsv1alpha1.Placement) ([]target, error) {
	all := &clusterv1.ClusterList{}
	if err := r.Client.List(ctx, all); err != nil {
		return nil, fmt.Errorf("list the Clusters: %w", err)
	}
	byKey := map[client.ObjectKey]*clusterv1.Cluster{}
	for i := range all.Items {
		byKey[client.ObjectKeyFromObject(&all.Items[i])] = &all.Items[i]
	}
	var out []target
	seen := map[client.ObjectKey]bool{}
	add := func(t target) {
		if !seen[t.key] {
			seen[t.key] = true
			out = append(out, t)
		}
	}
	for _, name := range p.Clusters {
		key := Key(appNamespace, name)
		c, found := byKey[key]
		switch {
		case !found:
			missing := fmt.Sprintf("no Cluster %s", name)
			if !strings.Contains(name, "/") {
				missing = fmt.Sprintf("no Cluster %s in %s (another namespace's is named namespace/name)", name, appNamespace)
			}
			add(target{key: key, missing: missing})
		case !c.DeletionTimestamp.IsZero():
			add(target{key: key, missing: fmt.Sprintf("Cluster %s is being deleted", name)})
		case r.Rules.Refuses(key) != "":
			add(target{key: key, missing: r.Rules.Refuses(key)})
		default:
			add(target{key: key})
		}
	}
	if p.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.Selector)
		if err != nil {
			return nil, fmt.Errorf("placement.selector: %w", err)
		}
		if sel.Empty() {
			sel = labels.Everything()
		}
		for _, c := range all.Items {
			key := client.ObjectKeyFromObject(&c)
			if sel.Matches(labels.Set(c.Labels)) && c.DeletionTimestamp.IsZero() && r.Rules.selects(appNamespace, c.Namespace) && r.Rules.Refuses(key) == "" {
				add(target{key: key})
			}
		}
	}
	return out, nil
}

// ObjectName is the name of the Flux object that runs an application on a cluster (a
// Kustomization, or a HelmRelease for a chart), in the cluster's namespace (its kubeconfig Secret
// is there): "<application>-<cluster>-<hash>", cut to 63 characters (Flux labels what it applies
// with it), the hash of both full names. Two applications, of any namespaces and names, never
// share one: "a-b" on cluster "c" and "a" on cluster "b-c" differ by their hash.
func ObjectName(app, cluster client.ObjectKey) string {
	sum := sha256.Sum256([]byte(app.Namespace + "/" + app.Name + "\x00" + cluster.Namespace + "/" + cluster.Name))
	hash := hex.EncodeToString(sum[:])[:8]
	prefix := app.Name + "-" + cluster.Name
	if max := validation.DNS1123LabelMaxLength - len(hash) - 1; len(prefix) > max {
		prefix = strings.TrimRight(prefix[:max], "-.")
	}
	return prefix + "-" + hash
}

// apply server-side applies the Flux object that runs the application on a cluster and returns
// it as it is: a Kustomization of its manifests, or a HelmRelease of its chart. An object of that
// name that this application did not place is not touched: refused says why.
func (r *Reconciler) apply(ctx context.Context, app *appsv1alpha1.Application, cluster client.ObjectKey) (obj client.Object, refused string, err error) {
	obj, refused, err = r.desired(ctx, app, cluster)
	if err != nil || refused != "" {
		return nil, refused, err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	existing, refused, err := r.refusal(ctx, obj)
	if err != nil || refused != "" {
		return nil, refused, err
	}
	// Nothing to change: not applied again. Each apply is a round trip to the API server even when
	// it changes nothing, and a full resync (a restart, any Cluster's change) is one per placement:
	// minutes at 1000 clusters × 100 applications. The whole spec is compared, not only the fields
	// set here: a field this controller set before and sets no more must still go.
	if existing != nil && unchanged(existing, obj) {
		existing.GetObjectKind().SetGroupVersionKind(gvk)
		return existing, "", nil
	}
	// Forced: the fields are this controller's; an object of another owner was refused above.
	if err := r.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return nil, "", fmt.Errorf("apply the %s of application %s on %s: %w", gvk.Kind, app.Name, cluster, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, "", nil
}

// desired is the Flux object that runs app on cluster: a HelmRelease of its chart, or a
// Kustomization of its manifests; refused says why there is none (its chart's values).
func (r *Reconciler) desired(ctx context.Context, app *appsv1alpha1.Application, cluster client.ObjectKey) (obj client.Object, refused string, err error) {
	spec := app.Spec
	source := spec.SourceRef
	if source.Namespace == "" {
		source.Namespace = app.Namespace
	}
	interval := spec.Interval
	if interval.Duration == 0 {
		interval.Duration = 5 * time.Minute
	}
	timeout := spec.Timeout
	if timeout == nil {
		timeout = &metav1.Duration{Duration: 5 * time.Minute}
	}
	objectMeta := metav1.ObjectMeta{
		Name: ObjectName(client.ObjectKeyFromObject(app), cluster), Namespace: cluster.Namespace,
		Labels: map[string]string{ApplicationLabel: applicationID(app), ClusterLabel: cluster.Name},
	}
	// In a tenant's namespace, what runs the application is reconciled by the tenant's Flux shard:
	// it talks to the tenant's cluster, whose API server answers as the tenant makes it.
	shard, err := r.shardOf(ctx, cluster.Namespace)
	if err != nil {
		return nil, "", err
	}
	if shard != "" {
		objectMeta.Labels[names.ShardLabel] = shard
	}
	kubeConfig := &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: kubeconfigSecret(cluster.Name), Key: "value"}}
	if spec.Chart != nil {
		values, err := clusterValues(spec.Chart.Values, cluster)
		if err != nil {
			return nil, fmt.Sprintf("spec.chart.values: %v", err), nil
		}
		obj = &helmv2.HelmRelease{
			TypeMeta:   metav1.TypeMeta{APIVersion: helmv2.GroupVersion.String(), Kind: helmv2.HelmReleaseKind},
			ObjectMeta: objectMeta,
			Spec: helmv2.HelmReleaseSpec{
				Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
					Chart:             spec.Chart.Path,
					Version:           "*", // the CRD's default, written out: the object read back is compared with this one
					ReconcileStrategy: "Revision",
					SourceRef:         helmv2.CrossNamespaceObjectReference{Kind: source.Kind, Name: source.Name, Namespace: source.Namespace},
				}},
				ReleaseName:      app.Name,
				TargetNamespace:  spec.TargetNamespace,
				StorageNamespace: spec.TargetNamespace,
				Interval:         interval,
				Timeout:          timeout,
				KubeConfig:       kubeConfig,
				Install:          &helmv2.Install{CreateNamespace: spec.TargetNamespace != ""},
				// The one thing that differs between clusters, for the charts that need it.
				Values: values,
			},
		}
	} else {
		obj = &kustomizev1.Kustomization{
			TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
			ObjectMeta: objectMeta,
			Spec: kustomizev1.KustomizationSpec{
				SourceRef:       source,
				Path:            spec.Path,
				TargetNamespace: spec.TargetNamespace,
				Interval:        interval,
				RetryInterval:   &metav1.Duration{Duration: 20 * time.Second},
				Timeout:         timeout,
				Prune:           true,
				Wait:            true,
				KubeConfig:      kubeConfig,
				// The one thing that differs between clusters, for the manifests that need it.
				PostBuild: &kustomizev1.PostBuild{Substitute: map[string]string{"CLUSTER_NAME": cluster.Name, "CLUSTER_NAMESPACE": cluster.Namespace}},
			},
		}
	}
	return obj, "", nil
}

// refusal says why want may not be applied, "" if it may: an object of its name exists that
// another application placed, or that no application placed. existing is the object of its name,
// nil if there is none.
func (r *Reconciler) refusal(ctx context.Context, want client.Object) (existing client.Object, refused string, err error) {
	kind := want.GetObjectKind().GroupVersionKind().Kind
	existing = want.DeepCopyObject().(client.Object)
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), existing); apierrors.IsNotFound(err) {
		return nil, "", nil
	} else if err != nil {
		return nil, "", fmt.Errorf("read %s %s/%s: %w", kind, want.GetNamespace(), want.GetName(), err)
	}
	owner, labelled := existing.GetLabels()[ApplicationLabel]
	switch {
	case !labelled || !placedHere(existing):
		return existing, fmt.Sprintf("%s %s/%s exists and no application placed it: not changed", kind, want.GetNamespace(), want.GetName()), nil
	case owner != want.GetLabels()[ApplicationLabel]:
		return existing, fmt.Sprintf("%s %s/%s belongs to application %s: not changed", kind, want.GetNamespace(), want.GetName(), strings.Replace(owner, ".", "/", 1)), nil
	}
	return existing, "", nil
}

// unchanged says whether applying want would leave existing as it is: its labels carry want's and
// its spec is want's.
func unchanged(existing, want client.Object) bool {
	for k, v := range want.GetLabels() {
		if existing.GetLabels()[k] != v {
			return false
		}
	}
	switch w := want.(type) {
	case *kustomizev1.Kustomization:
		e, ok := existing.(*kustomizev1.Kustomization)
		return ok && equality.Semantic.DeepEqual(e.Spec, w.Spec)
	case *helmv2.HelmRelease:
		e, ok := existing.(*helmv2.HelmRelease)
		return ok && equality.Semantic.DeepEqual(e.Spec, w.Spec)
	}
	return false
}

// clusterValues are a chart's values with cluster.name and cluster.namespace set to the cluster's.
func clusterValues(values *apiextensionsv1.JSON, cluster client.ObjectKey) (*apiextensionsv1.JSON, error) {
	merged := map[string]any{}
	if values != nil && len(values.Raw) > 0 {
		if err := json.Unmarshal(values.Raw, &merged); err != nil {
			return nil, fmt.Errorf("expected a map: %w", err)
		}
	}
	merged["cluster"] = map[string]any{"name": cluster.Name, "namespace": cluster.Namespace}
	raw, err := json.Marshal(merged)
	if err != nil {
		return nil, err
	}
	return &apiextensionsv1.JSON{Raw: raw}, nil
}

// placementOf is the state of the Flux object that runs the application on a cluster: ready for
// its generation, failed (stalled, or its last attempt at this generation failed: Flux retries it,
// but someone must look), or on its way.
func placementOf(obj client.Object) appsv1alpha1.PlacementStatus {
	var st readiness.Status
	switch o := obj.(type) {
	case *kustomizev1.Kustomization:
		st = readiness.Of(o)
	case *helmv2.HelmRelease:
		st = readiness.Of(o)
	}
	switch {
	case st.State == readiness.Ready:
		return appsv1alpha1.PlacementStatus{State: appsv1alpha1.StateReady}
	case st.State == readiness.Failed || st.Failing:
		return appsv1alpha1.PlacementStatus{State: appsv1alpha1.StateFailed, Message: st.Reason + ": " + st.Message}
	case st.Message != "":
		return appsv1alpha1.PlacementStatus{State: appsv1alpha1.StateProgressing, Message: st.Message}
	default:
		return appsv1alpha1.PlacementStatus{State: appsv1alpha1.StateProgressing, Message: "not reconciled yet"}
	}
}

// summed is the Ready condition of an application: true when every cluster of its placement runs
// it; the clusters leaving it do not count.
func summed(app *appsv1alpha1.Application, placements []appsv1alpha1.PlacementStatus) metav1.Condition {
	var notReady []string
	ready := 0
	for _, p := range placements {
		switch p.State {
		case appsv1alpha1.StateRemoving:
		case appsv1alpha1.StateReady:
			ready++
		default:
			notReady = append(notReady, fmt.Sprintf("%s %s (%s)", p.Cluster, strings.ToLower(string(p.State)), p.Message))
		}
	}
	if ready+len(notReady) == 0 {
		return condition(app, metav1.ConditionFalse, "NoCluster", "the placement matches no cluster")
	}
	if len(notReady) == 0 {
		return condition(app, metav1.ConditionTrue, "Placed", fmt.Sprintf("ready on %s", clusters(ready)))
	}
	return condition(app, metav1.ConditionFalse, "NotPlaced", notPlaced(ready, notReady))
}

// maxConditionMessage is the most a condition's message may hold: the API server refuses a
// status with a longer one, and the application would keep no status at all.
const maxConditionMessage = 32768

// notPlaced is the message of an application not ready everywhere: the clusters it is not ready
// on, as many as fit (placed on hundreds of clusters, or with Flux's long errors, they do not all
// fit), the others counted; status.placements has each.
func notPlaced(ready int, notReady []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ready on %d of %d clusters; not on: ", ready, ready+len(notReady))
	// What "; and 1000000 more (status.placements has each)" needs, kept free until the last.
	const more = 64
	for i, n := range notReady {
		room := maxConditionMessage - b.Len() - len("; ")
		if i < len(notReady)-1 {
			room -= more
		}
		if len(n) > room {
			if i == 0 {
				fmt.Fprintf(&b, "%d clusters (status.placements has each)", len(notReady))
			} else {
				fmt.Fprintf(&b, "; and %d more (status.placements has each)", len(notReady)-i)
			}
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(n)
	}
	return b.String()
}

func clusters(n int) string {
	if n == 1 {
		return "1 cluster"
	}
	return fmt.Sprintf("%d clusters", n)
}

func condition(app *appsv1alpha1.Application, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: meta.ReadyCondition, Status: status, Reason: reason, Message: msg, ObservedGeneration: app.Generation}
}

// placedObjects are the Flux objects that run the application on its clusters.
func (r *Reconciler) placedObjects(ctx context.Context, appID string) ([]client.Object, error) {
	var ofApp client.ListOption = client.MatchingLabels{ApplicationLabel: appID}
	if r.indexed {
		ofApp = client.MatchingFields{applicationIndex: appID}
	}
	objs, err := fluxobjects.List(ctx, r.Client, ofApp)
	if err != nil {
		return nil, fmt.Errorf("the Flux objects of application %s: %w", appID, err)
	}
	var out []client.Object
	for _, o := range objs.All() {
		if placedHere(o) {
			out = append(out, o)
		}
	}
	return out, nil
}

// shardOf is the Flux shard of a tenant's namespace (its label, which the platform's chart sets),
// "" for a namespace of no tenant's.
func (r *Reconciler) shardOf(ctx context.Context, namespace string) (string, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if ns.Labels[names.TenantLabel] != "true" {
		return "", nil
	}
	return ns.Labels[names.ShardLabel], nil
}

// placedHere tells whether this controller applied o. Its labels are not enough: whoever writes
// objects in a cluster's namespace can write them (a tenant's HelmRelease in its own namespace),
// and the admission policies refusing them there are one check, not the only one. Its field
// manager is: a server-side apply cannot claim another manager's name (the API server refuses
// managedFields in an apply), and what Flux applies for a tenant it applies server-side.
func placedHere(o client.Object) bool {
	for _, m := range o.GetManagedFields() {
		if m.Manager == fieldOwner && m.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// finalize deletes every Kustomization of a deleted application (Flux prunes what they applied),
// then lets the application go.
func (r *Reconciler) finalize(ctx context.Context, app *appsv1alpha1.Application, existing []client.Object) (reconcile.Result, error) {
	for _, o := range existing {
		if err := r.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("delete %s %s/%s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	if len(existing) > 0 {
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	controllerutil.RemoveFinalizer(app, Finalizer)
	if err := r.Client.Update(ctx, app); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("remove the finalizer of application %s: %w", app.Name, err)
	}
	return reconcile.Result{}, nil
}

func (r *Reconciler) writeStatus(ctx context.Context, app *appsv1alpha1.Application, st appsv1alpha1.ApplicationStatus) (reconcile.Result, error) {
	st.ObservedGeneration = app.Generation
	// The conditions' transition times: kept while their status stays.
	conditions := app.Status.Conditions
	for _, c := range st.Conditions {
		apimeta.SetStatusCondition(&conditions, c)
	}
	st.Conditions = conditions
	app.Status = st
	if err := r.Client.Status().Update(ctx, app); err != nil {
		return reconcile.Result{}, fmt.Errorf("write the status of application %s: %w", app.Name, err)
	}
	return reconcile.Result{}, nil
}
