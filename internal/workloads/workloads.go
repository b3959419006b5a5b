// Package workloads reads the workload clusters committed to a repository the way the management
// cluster does: the tenants' Kustomizations that the workload-clusters unit renders are built
// against the repository (kustomize-controller's build, the platform's patch included), every
// HelmRelease they produce is checked with the expressions of the admission policy the unit
// renders (evaluated here with CEL, as the API server evaluates them), and each is rendered as its
// release: the cluster-init chart in the workload context, with the platform's values and the
// tenant's. Problems name the file and line of the tenant's values.
package workloads

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/sourceignore"
	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/boundedfile"
	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kustomize"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/values"
)

// Tenant is a namespace of workload clusters and the Kustomization that applies its directory.
type Tenant struct {
	Namespace     string
	Path          string
	Kustomization *unstructured.Unstructured
	// Repository is the URL of the tenant's own repository, "" when its directory is in the
	// platform's; Checkout the directory its clusters are read from ("": not at hand).
	Repository, Checkout string
	// Ignore are the ignore rules of its source (what source-controller leaves out of its artifact).
	Ignore string
	// Platform is what its clusters share with the management cluster (a valuesFrom layer).
	Platform values.Layer
	// Params are its parameters of the admission policy (ConfigMap names.TenantParamsConfigMap).
	Params *unstructured.Unstructured
}

// Cluster is one workload cluster committed to a tenant's directory.
type Cluster struct {
	Name   string
	Tenant *Tenant
	// File is the file of its HelmRelease, relative to its tenant's checkout.
	File string
	// Release is the HelmRelease as the tenant's Kustomization applies it.
	Release *unstructured.Unstructured
	// Values are the tenant's values (spec.values), with the lines of File.
	Values values.Layer
}

// Plan is what a management cluster makes of the repository's workload clusters.
type Plan struct {
	Tenants  []*Tenant
	Clusters []*Cluster
	// Others are the objects of the tenants' directories that are no workload cluster: what the
	// tenant's account may write decides whether the API server takes them.
	Others []*Object
	policy *policy
}

// Object is an object a tenant's directory builds, with where it is written.
type Object struct {
	Tenant *Tenant
	// File and Line are where it is written, relative to its tenant's checkout ("" when not found).
	File   string
	Line   int
	Object *unstructured.Unstructured
}

// releaseGroup is the API group of a workload cluster's HelmRelease.
const releaseGroup = "helm.toolkit.fluxcd.io"

// Read finds the tenants in a render of the management cluster (its workload-clusters unit) and
// builds their directories: of the checkout at repoRoot, or, for a tenant with a repository of
// its own, of its checkout in tenantCheckouts (namespace -> directory), if given. A tenant whose
// checkout is not at hand keeps Checkout empty: none of its clusters is read.
func Read(ctx context.Context, repoRoot string, management *render.Result, tenantCheckouts map[string]string) (*Plan, error) {
	p := &Plan{}
	var policy *unstructured.Unstructured
	for _, o := range management.Objects {
		obj := o.Object
		switch {
		case obj.GetKind() == "Kustomization" && obj.GetName() == names.TenantKustomization && obj.GetNamespace() != names.Namespace:
			path, _, _ := unstructured.NestedString(obj.Object, "spec", "path")
			p.Tenants = append(p.Tenants, &Tenant{Namespace: obj.GetNamespace(), Path: path, Kustomization: obj})
		case obj.GetKind() == "ValidatingAdmissionPolicy" && obj.GetName() == PolicyName:
			policy = obj
		}
	}
	if len(p.Tenants) == 0 {
		if len(tenantCheckouts) > 0 {
			return p, fmt.Errorf("checkouts of tenants' repositories were given (%s), but the management cluster has no tenant (workload_clusters.tenants, with a git source)", strings.Join(slices.Sorted(maps.Keys(tenantCheckouts)), ", "))
		}
		return p, nil
	}
	if err := p.describeTenants(management, repoRoot, tenantCheckouts); err != nil {
		return nil, err
	}
	var err error
	if p.policy, err = compilePolicy(policy); err != nil {
		return nil, err
	}
	var problems []string
	for ns := range tenantCheckouts {
		if !slices.ContainsFunc(p.Tenants, func(t *Tenant) bool { return t.Namespace == ns && t.Repository != "" }) {
			problems = append(problems, fmt.Sprintf("a checkout of tenant %s's repository was given, but workload_clusters.tenants.%s has no repository of its own", ns, ns))
		}
	}
	for _, t := range p.Tenants {
		more, err := p.readDirectory(ctx, t)
		if err != nil {
			return nil, err
		}
		problems = append(problems, more...)
	}
	sort.Slice(p.Clusters, func(i, j int) bool { return p.Clusters[i].File < p.Clusters[j].File })
	if len(problems) > 0 {
		return p, errors.New(strings.Join(problems, "\n"))
	}
	return p, nil
}

// describeTenants completes each tenant from what it has in the render, looked up by its
// namespace in one pass over the objects, however many tenants there are: its source (its ignore
// rules, its own repository, whose checkout is tenantCheckouts' or none), its parameters and the
// values its clusters share. A tenant of the platform's repository reads repoRoot.
func (p *Plan) describeTenants(management *render.Result, repoRoot string, tenantCheckouts map[string]string) error {
	sources := map[string]*unstructured.Unstructured{}
	configMaps := map[[2]string]*unstructured.Unstructured{}
	for _, o := range management.Objects {
		switch o.Object.GetKind() {
		case "GitRepository":
			if ns, ok := o.Object.GetLabels()[names.TenantLabel]; ok {
				sources[ns] = o.Object
			}
		case "ConfigMap":
			configMaps[[2]string{o.Object.GetNamespace(), o.Object.GetName()}] = o.Object
		}
	}
	for _, t := range p.Tenants {
		t.Checkout = repoRoot
		if src := sources[t.Namespace]; src != nil {
			t.Ignore, _, _ = unstructured.NestedString(src.Object, "spec", "ignore")
			if src.GetLabels()[names.RepositoryLabel] == names.TenantRepository {
				t.Repository, _, _ = unstructured.NestedString(src.Object, "spec", "url")
				t.Checkout = tenantCheckouts[t.Namespace]
			}
		}
		t.Params = configMaps[[2]string{t.Namespace, names.TenantParamsConfigMap}]
		if cm := configMaps[[2]string{t.Namespace, names.TenantPlatformConfigMap}]; cm != nil {
			data, _, _ := unstructured.NestedString(cm.Object, "data", names.ValuesKey)
			l, err := values.ParseLayer(fmt.Sprintf("(values the workload clusters of %s share: ConfigMap %s/%s)", t.Namespace, t.Namespace, names.TenantPlatformConfigMap), []byte(data), false)
			if err != nil {
				return err
			}
			t.Platform = l
		}
	}
	return nil
}

// readDirectory builds a tenant's directory as kustomize-controller does (from its artifact: what
// the rules of the tenant's source keep of the checkout, its directory alone, no kustomization
// file) and adds its clusters and other objects to the plan; problems are what is wrong with the
// directory, the error what stops the read. A tenant whose checkout is not at hand is not read.
func (p *Plan) readDirectory(ctx context.Context, t *Tenant) (problems []string, err error) {
	if t.Checkout == "" {
		return nil, nil
	}
	built, files, unread, err := buildArtifact(ctx, t)
	problems = append(problems, unread...)
	if err != nil {
		return append(problems, fmt.Sprintf("%s: %v", strings.TrimPrefix(t.Path, "./"), err)), nil
	}
	if files == nil {
		return problems, nil
	}
	docs, err := documents(files)
	if err != nil {
		return nil, err
	}
	for _, obj := range built {
		d, found := docs[obj.GetKind()+"/"+obj.GetName()]
		if obj.GetKind() != "HelmRelease" || obj.GroupVersionKind().Group != releaseGroup {
			p.Others = append(p.Others, &Object{Tenant: t, File: d.file, Line: d.line, Object: obj})
			continue
		}
		if !found {
			problems = append(problems, fmt.Sprintf("%s: HelmRelease %s: not found in a file of the directory", t.Path, obj.GetName()))
			continue
		}
		p.Clusters = append(p.Clusters, &Cluster{Name: obj.GetName(), Tenant: t, Release: obj, File: d.file, Values: d.values})
	}
	return problems, nil
}

// buildArtifact builds a tenant's Kustomization as kustomize-controller does: from its artifact,
// the files of its directory of its checkout that the ignore rules of its source keep (as
// source-controller applies them), read within the bounds of a manifest (boundedfile). files are
// the manifests read, by path relative to the checkout; unread says what of the directory the
// cluster never reads: the manifests and kustomization files the rules leave out, and the links
// and special files source-controller leaves out of every artifact.
func buildArtifact(ctx context.Context, t *Tenant) (objs []*unstructured.Unstructured, files *boundedfile.Tree, unread []string, err error) {
	ignored := sourceignore.NewDefaultMatcher(sourceignore.ReadPatterns(strings.NewReader(t.Ignore), nil), nil)
	rel := filepath.ToSlash(filepath.Clean(t.Path))
	files, err = boundedfile.ReadTree(t.Checkout, rel, boundedfile.Manifest, func(r string, e fs.DirEntry) boundedfile.Choice {
		if r != "." && ignored.Match(strings.Split(r, "/"), e.IsDir()) {
			if !e.IsDir() && boundedfile.IsManifest(r) {
				unread = append(unread, fmt.Sprintf("%s: never read: a tenant's directory is plain manifests, which the platform lists itself (its source leaves out every kustomization file: no remote resource, generator or path out of the directory); expected HelmRelease files only", r))
			}
			return boundedfile.Skip
		}
		if !e.IsDir() && !boundedfile.IsManifest(r) {
			return boundedfile.Skip // kustomize-controller lists only the manifests of the directory
		}
		return boundedfile.Read
	})
	if err != nil {
		return nil, nil, []string{err.Error()}, nil // names the file, or the bound
	}
	for _, e := range files.Unread {
		unread = append(unread, e.Error())
	}
	if len(files.Files) == 0 {
		return nil, files, unread, nil // nothing of the directory is in the artifact
	}
	snap, err := os.MkdirTemp("", "cluster-init-tenant-")
	if err != nil {
		return nil, nil, nil, err
	}
	defer os.RemoveAll(snap)
	if err := files.Write(snap); err != nil {
		return nil, nil, nil, err
	}
	b, err := kustomize.NewBuilder(snap)
	if err != nil {
		return nil, nil, nil, err
	}
	objs, err = b.Build(ctx, t.Kustomization)
	return objs, files, unread, err
}

// document is where an object of a tenant's directory is written; for a HelmRelease, with the
// lines of its values.
type document struct {
	file   string
	line   int
	values values.Layer
}

// documents finds the objects of a tenant's directory (the files its build read), by kind/name.
func documents(files *boundedfile.Tree) (map[string]document, error) {
	out := map[string]document{}
	for _, rel := range files.Order {
		dec := yamlv3.NewDecoder(bytes.NewReader(files.Files[rel]))
		for {
			var doc yamlv3.Node
			if err := dec.Decode(&doc); err != nil {
				break // the end, or a document the build reported
			}
			if len(doc.Content) == 0 {
				continue
			}
			var head struct {
				Kind     string `yaml:"kind"`
				Metadata struct {
					Name string `yaml:"name"`
				} `yaml:"metadata"`
			}
			if doc.Content[0].Decode(&head) != nil {
				continue
			}
			d := document{file: rel, line: doc.Content[0].Line, values: values.FromMap(rel, map[string]any{})}
			if node := child(doc.Content[0], "spec", "values"); node != nil && head.Kind == "HelmRelease" {
				var err error
				if d.values, err = values.NodeLayer(rel, node, false); err != nil {
					return nil, err
				}
			}
			out[head.Kind+"/"+head.Metadata.Name] = d
		}
	}
	return out, nil
}

func child(n *yamlv3.Node, path ...string) *yamlv3.Node {
	for _, p := range path {
		if n.Kind != yamlv3.MappingNode {
			return nil
		}
		var next *yamlv3.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == p {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// Admit evaluates the admission policy on a cluster's HelmRelease as the API server will when the
// tenant's Kustomization applies it, with the tenant's parameters.
func (p *Plan) Admit(c *Cluster) error {
	user := "system:serviceaccount:" + c.Tenant.Namespace + ":" + names.TenantAccount
	refused, err := p.policy.admit(c.Release, c.Tenant.Namespace, user, c.Tenant.Params)
	if err != nil {
		return err
	}
	if len(refused) == 0 {
		return nil
	}
	// A refused value is shown where the file sets it (file:line: key: ...); the rest of the
	// HelmRelease is the platform's, named by its field.
	var lines []string
	for _, m := range refused {
		if key, rest, ok := strings.Cut(m, ": "); ok && strings.HasPrefix(key, "spec.values.") {
			path := strings.Split(strings.TrimPrefix(key, "spec.values."), ".")
			if line, ok := lineOf(c.Values, path); ok {
				lines = append(lines, fmt.Sprintf("%s:%d: %s: %s (admission policy %s)", c.File, line, strings.Join(path, "."), rest, PolicyName))
				continue
			}
		}
		lines = append(lines, fmt.Sprintf("%s: HelmRelease %s is refused by the admission policy %s: %s", c.File, c.Name, PolicyName, m))
	}
	return errors.New(strings.Join(lines, "\n"))
}

// lineOf is the line of the value at path in l, or of its closest parent the file sets.
func lineOf(l values.Layer, path []string) (int, bool) {
	for n := len(path); n > 0; n-- {
		if line, ok := l.Has(path[:n]); ok {
			return line, true
		}
	}
	return 0, false
}

// Render renders a cluster's release as helm-controller will: the chart in the workload context,
// the platform's values, the tenant's values.
func (p *Plan) Render(ctx context.Context, r *render.Renderer, c *Cluster) (*render.Result, error) {
	env := &environment.Environment{Name: filepath.ToSlash(filepath.Dir(c.File)), Dir: filepath.Join(c.Tenant.Checkout, filepath.Dir(c.File)), Layers: []values.Layer{c.Values}}
	return r.Render(ctx, render.Options{
		Env: env, Context: render.ContextWorkload, Platform: []values.Layer{c.Tenant.Platform},
		Release: c.Name, Namespace: c.Tenant.Namespace,
	})
}
