// Package backupjob takes a management cluster's backup, as its backup Job runs it in the
// cluster: the Cluster API objects of every namespace that holds clusters, in clusterctl move's
// directory format (clusterctl pauses each cluster for the time it reads it), and what the
// platform keeps beside them (its tenants' namespaces and parameters, the applications placed);
// the archive age-encrypted to the recipients of the values and written to the object store;
// then the backups past their retention removed, the newest never. What happened is kept in the
// backup's status ConfigMap, which `bootstrap status` reads.
package backupjob

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/objectstore"
	"cluster-init.dev/cluster-init/internal/pivot"
)

// Options say what to back up, why, and where.
type Options struct {
	// Environment is the environment the management cluster serves; Cluster its name.
	Environment, Cluster string
	Reason               string
	Version              string
	Store                *objectstore.Store
	Recipients           []age.Recipient
	Retention            backup.Retention
	// WorkDir holds clusterctl's directories and the archive for the time of the backup.
	WorkDir string
	Now     func() time.Time
}

// Result is a backup written, and the namespaces left out of it.
type Result struct {
	Entry   backup.Entry
	Skipped []backup.Namespace
}

// Take backs the cluster up, as Options say, and returns the backup written. A namespace that
// clusterctl cannot save now (a cluster still provisioning, a machine without its node) is left
// out and named in the result: one tenant's cluster coming up stops no one else's backup.
func Take(ctx context.Context, c *kube.Cluster, o Options) (Result, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	created := o.Now().UTC().Truncate(time.Second)
	contents, err := Collect(ctx, c, backup.Meta{Environment: o.Environment, Cluster: o.Cluster, Created: created,
		Reason: o.Reason, Version: o.Version}, o.WorkDir)
	if err != nil {
		return Result{}, err
	}
	key := backup.Key(o.Environment, created, o.Reason)
	size, err := upload(ctx, o, key, contents)
	if err != nil {
		return Result{}, err
	}
	res := Result{}
	res.Entry, _ = backup.ParseKey(key, size)
	for _, ns := range contents.Meta.Namespaces {
		if ns.Skipped != "" {
			res.Skipped = append(res.Skipped, ns)
		}
	}
	if err := retain(ctx, o, created); err != nil {
		return res, fmt.Errorf("backup %s written; %w", key, err)
	}
	return res, nil
}

// Collect reads what a backup of the cluster holds, as meta describes it, into memory: clusterctl's
// directory of each namespace with clusters that it can save now (workDir holds them for the time
// of the read), and the platform's state beside them.
func Collect(ctx context.Context, c *kube.Cluster, meta backup.Meta, workDir string) (backup.Contents, error) {
	contents := backup.Contents{Meta: meta, Files: map[string][]byte{}}
	namespaces, err := clusterNamespaces(ctx, c.Client)
	if err != nil {
		return contents, err
	}
	if err := saveClusters(ctx, c, workDir, namespaces, &contents); err != nil {
		return contents, err
	}
	if err := savePlatform(ctx, c.Client, contents.Files); err != nil {
		return contents, err
	}
	return contents, nil
}

// clusterNamespaces are the namespaces that hold Cluster API clusters, by name, and their clusters.
func clusterNamespaces(ctx context.Context, c client.Reader) (map[string][]string, error) {
	list := &clusterv1.ClusterList{}
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list the clusters to back up: %w", err)
	}
	out := map[string][]string{}
	for _, cl := range list.Items {
		out[cl.Namespace] = append(out[cl.Namespace], cl.Name)
	}
	for ns := range out {
		slices.Sort(out[ns])
	}
	return out, nil
}

// saveClusters has clusterctl save each namespace's objects to a directory of its own, and reads
// them into the backup.
func saveClusters(ctx context.Context, c *kube.Cluster, workDir string, namespaces map[string][]string, contents *backup.Contents) error {
	kubeconfig := filepath.Join(workDir, "management.kubeconfig")
	if err := os.WriteFile(kubeconfig, c.Kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write the kubeconfig clusterctl reads: %w", err)
	}
	defer os.Remove(kubeconfig)
	cc, err := pivot.Clusterctl(ctx)
	if err != nil {
		return err
	}
	var order []string
	for ns := range namespaces {
		order = append(order, ns)
	}
	sort.Strings(order)
	for _, ns := range order {
		entry := backup.Namespace{Name: ns, Management: ns == names.Namespace, Clusters: namespaces[ns]}
		if why, err := notSavable(ctx, c.Client, ns); err != nil {
			return err
		} else if why != "" {
			entry.Skipped = why
			contents.Meta.Namespaces = append(contents.Meta.Namespaces, entry)
			continue
		}
		dir := filepath.Join(workDir, "clusterctl", ns)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("back up namespace %s: %w", ns, err)
		}
		if err := cc.Move(ctx, clusterctl.MoveOptions{FromKubeconfig: clusterctl.Kubeconfig{Path: kubeconfig}, Namespace: ns, ToDirectory: dir}); err != nil {
			return fmt.Errorf("back up namespace %s with clusterctl: %w", ns, err)
		}
		files, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("back up namespace %s: %w", ns, err)
		}
		for _, f := range files {
			data, err := readBounded(filepath.Join(dir, f.Name()))
			if err != nil {
				return fmt.Errorf("back up namespace %s: %w", ns, err)
			}
			contents.Files[backup.ClusterctlDir(ns)+"/"+f.Name()] = data
		}
		os.RemoveAll(dir)
		entry.Objects = len(files)
		contents.Meta.Namespaces = append(contents.Meta.Namespaces, entry)
	}
	return nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, backup.MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > backup.MaxFileBytes {
		return nil, fmt.Errorf("%s: more than %d bytes", filepath.Base(path), backup.MaxFileBytes)
	}
	return data, nil
}

// savePlatform keeps what the platform holds beside the clusters: its tenants' namespaces (their
// labels and annotations) with their parameters, and the applications and where they are placed.
// A new management cluster makes them again from git; these say what the lost one had.
func savePlatform(ctx context.Context, c client.Reader, files map[string][]byte) error {
	nss := &corev1.NamespaceList{}
	if err := c.List(ctx, nss, client.HasLabels{names.TenantLabel}); err != nil {
		return fmt.Errorf("list the tenants' namespaces: %w", err)
	}
	var tenants []any
	for _, ns := range nss.Items {
		entry := map[string]any{"namespace": metav1.ObjectMeta{Name: ns.Name, Labels: ns.Labels, Annotations: ns.Annotations}}
		params := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: names.TenantParamsConfigMap}, params); err == nil {
			entry["parameters"] = params.Data
		}
		tenants = append(tenants, entry)
	}
	apps := &appsv1alpha1.ApplicationList{}
	if err := c.List(ctx, apps); err != nil && !strings.Contains(err.Error(), "no matches for kind") {
		return fmt.Errorf("list the applications: %w", err)
	}
	var placed []any
	for _, a := range apps.Items {
		u, err := toMap(&a)
		if err != nil {
			return err
		}
		unstructured.RemoveNestedField(u, "metadata", "managedFields")
		placed = append(placed, u)
	}
	for name, v := range map[string]any{"platform/tenants.yaml": tenants, "platform/applications.yaml": placed} {
		data, err := yaml.Marshal(map[string]any{"items": v})
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		files[name] = data
	}
	return nil
}

func toMap(obj any) (map[string]any, error) {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, yaml.Unmarshal(data, &out)
}

// upload writes the archive to a file of the work directory (a backup can be larger than memory
// should hold twice), then to the store with its size.
func upload(ctx context.Context, o Options, key string, contents backup.Contents) (int64, error) {
	path := filepath.Join(o.WorkDir, "backup"+backup.Suffix)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return 0, fmt.Errorf("write backup %s: %w", key, err)
	}
	defer os.Remove(path)
	defer f.Close()
	if err := backup.Write(f, contents, o.Recipients); err != nil {
		return 0, err
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, fmt.Errorf("write backup %s: %w", key, err)
	}
	if size > backup.MaxArchiveBytes {
		return 0, fmt.Errorf("backup %s: %d bytes, more than %d", key, size, backup.MaxArchiveBytes)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("write backup %s: %w", key, err)
	}
	meta := map[string]string{"environment": o.Environment, "cluster": o.Cluster, "reason": o.Reason, "format": fmt.Sprint(backup.Format)}
	if err := o.Store.Put(ctx, key, f, size, meta); err != nil {
		return 0, err
	}
	return size, nil
}

// retain removes the environment's backups past their retention.
func retain(ctx context.Context, o Options, now time.Time) error {
	entries, err := List(ctx, o.Store, o.Environment)
	if err != nil {
		return err
	}
	for _, e := range o.Retention.Expired(entries, now) {
		if err := o.Store.Delete(ctx, e.Key); err != nil {
			return fmt.Errorf("remove backup %s past its retention: %w", e.Key, err)
		}
	}
	return nil
}

// List are the environment's backups in the store, oldest first; other objects are left out.
func List(ctx context.Context, s *objectstore.Store, env string) ([]backup.Entry, error) {
	objs, err := s.List(ctx, backup.Prefix(env))
	if err != nil {
		return nil, err
	}
	var out []backup.Entry
	for _, o := range objs {
		if e, ok := backup.ParseKey(o.Key, o.Size); ok && e.Environment == env {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Fetch reads a backup from the store and checks it with the identities (the age key of the
// environment's secrets): nothing of it is returned unless it is whole, of env, and of a format
// this reads.
func Fetch(ctx context.Context, s *objectstore.Store, e backup.Entry, env string, identities []age.Identity) (backup.Contents, error) {
	data, err := s.Get(ctx, e.Key, backup.MaxArchiveBytes)
	if err != nil {
		return backup.Contents{}, err
	}
	c, err := backup.Read(bytes.NewReader(data), identities, backup.Expect{Environment: env})
	if err != nil {
		return backup.Contents{}, fmt.Errorf("backup %s: %w", e.Key, err)
	}
	return c, nil
}

// notSavable says why clusterctl would refuse to save namespace ns now, as its move checks it
// (objectMover.checkProvisioningCompleted and checkClustersNotPaused, clusterctl v1.14): asked
// here first, without the minute clusterctl spends retrying before it gives up.
func notSavable(ctx context.Context, c client.Reader, ns string) (string, error) {
	clusters := &clusterv1.ClusterList{}
	if err := c.List(ctx, clusters, client.InNamespace(ns)); err != nil {
		return "", fmt.Errorf("back up namespace %s: %w", ns, err)
	}
	for _, cl := range clusters.Items {
		switch {
		case cl.Spec.Paused != nil && *cl.Spec.Paused:
			return fmt.Sprintf("cluster %s is paused", cl.Name), nil
		case !ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false):
			return fmt.Sprintf("cluster %s is still provisioning its infrastructure", cl.Name), nil
		case !conditions.IsTrue(&cl, clusterv1.ClusterControlPlaneInitializedCondition),
			cl.Spec.ControlPlaneRef.IsDefined() && !ptr.Deref(cl.Status.Initialization.ControlPlaneInitialized, false):
			return fmt.Sprintf("the control plane of cluster %s is not initialized yet", cl.Name), nil
		}
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(ns)); err != nil {
		return "", fmt.Errorf("back up namespace %s: %w", ns, err)
	}
	for _, m := range machines.Items {
		if !m.Status.NodeRef.IsDefined() {
			return fmt.Sprintf("machine %s has no node yet", m.Name), nil
		}
	}
	return "", nil
}
