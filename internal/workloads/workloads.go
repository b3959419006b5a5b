// Package workloads reads the workload clusters committed to a repository the way the management
// cluster does: the tenants' Kustomizations that the workload-clusters unit renders are built
// against the repository (kustomize-controller's build, the platform's patch included), every
// HelmRelease they produce is checked with the expressions of the admission policy the unit
// renders (evaluated here with CEL, as the API server evaluates them), and each is rendered as its
// release: the cluster-init chart in the workload context, with the platform's values and the
// tenant's. Problems name the file and line of the tenant's values.
package workloads

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/sourceignore"
	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kustomize"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/source"
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
	policy   *policy
}

// Read finds the tenants in a render of the management cluster (its workload-clusters unit) and
// builds their directories: of the checkout at repoRoot, or, for a tenant with a repository of
// its own, of its checkout in tenantCheckouts (namespace -> directory), if given. A tenant whose
// checkout is not at hand keeps Checkout empty: none of its clusters is read.
func Read(ctx context.Context, repoRoot string, management *render.Result, tenantCheckouts map[string]string) (*Plan, error) {
	p := &Plan{}
	var policy *unstructured.Unstructured
	var err error
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
		return p, nil
	}
	for _, t := range p.Tenants {
		t.Checkout = repoRoot
		for _, o := range management.Objects {
			if o.Object.GetKind() == "GitRepository" && o.Object.GetLabels()[names.TenantLabel] == t.Namespace {
				t.Ignore, _, _ = unstructured.NestedString(o.Object.Object, "spec", "ignore")
				if o.Object.GetLabels()[names.RepositoryLabel] == names.TenantRepository {
					t.Repository, _, _ = unstructured.NestedString(o.Object.Object, "spec", "url")
					t.Checkout = tenantCheckouts[t.Namespace]
				}
			}
			if o.Object.GetKind() == "ConfigMap" && o.Object.GetNamespace() == t.Namespace && o.Object.GetName() == names.TenantParamsConfigMap {
				t.Params = o.Object
			}
			if o.Object.GetKind() == "ConfigMap" && o.Object.GetNamespace() == t.Namespace && o.Object.GetName() == names.TenantPlatformConfigMap {
				data, _, _ := unstructured.NestedString(o.Object.Object, "data", names.ValuesKey)
				l, err := values.ParseLayer(fmt.Sprintf("(values the workload clusters of %s share: ConfigMap %s/%s)", t.Namespace, t.Namespace, names.TenantPlatformConfigMap), []byte(data), false)
				if err != nil {
					return nil, err
				}
				t.Platform = l
			}
		}
	}
	if p.policy, err = compilePolicy(policy); err != nil {
		return nil, err
	}

	// The tenants' directories, as kustomize-controller builds them: each from its artifact, what
	// the rules of the tenant's source keep of the checkout (its directory alone, no kustomization
	// file).
	var problems []string
	for ns := range tenantCheckouts {
		if !slices.ContainsFunc(p.Tenants, func(t *Tenant) bool { return t.Namespace == ns && t.Repository != "" }) {
			problems = append(problems, fmt.Sprintf("a checkout of tenant %s's repository was given, but workload_clusters.tenants.%s has no repository of its own", ns, ns))
		}
	}
	for _, t := range p.Tenants {
		if t.Checkout == "" {
			continue
		}
		repoRoot := t.Checkout
		dir := filepath.Join(repoRoot, filepath.Clean(t.Path))
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			continue // no workload cluster committed yet
		}
		built, leftOut, err := buildArtifact(ctx, repoRoot, t)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", strings.TrimPrefix(t.Path, "./"), err))
			continue
		}
		for _, f := range leftOut {
			problems = append(problems, fmt.Sprintf("%s: never read: a tenant's directory is plain manifests, which the platform lists itself (its source leaves out every kustomization file: no remote resource, generator or path out of the directory); expected HelmRelease files only", f))
		}
		files, err := releaseFiles(repoRoot, dir)
		if err != nil {
			return nil, err
		}
		for _, obj := range built {
			if obj.GetKind() != "HelmRelease" {
				continue
			}
			c := &Cluster{Name: obj.GetName(), Tenant: t, Release: obj}
			f, ok := files[obj.GetName()]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: HelmRelease %s: not found in a file of the directory", t.Path, obj.GetName()))
				continue
			}
			c.File, c.Values = f.file, f.values
			p.Clusters = append(p.Clusters, c)
		}
	}
	sort.Slice(p.Clusters, func(i, j int) bool { return p.Clusters[i].File < p.Clusters[j].File })
	if len(problems) > 0 {
		return p, errors.New(strings.Join(problems, "\n"))
	}
	return p, nil
}

// buildArtifact builds a tenant's Kustomization as kustomize-controller does: from its artifact,
// the files of its directory of the checkout that the ignore rules of its source keep (as
// source-controller applies them). leftOut are the manifests and kustomization files of the
// directory that the rules leave out, relative to the checkout.
func buildArtifact(ctx context.Context, repoRoot string, t *Tenant) (objs []*unstructured.Unstructured, leftOut []string, err error) {
	snap, err := os.MkdirTemp("", "cluster-init-tenant-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(snap)
	ignored := sourceignore.NewDefaultMatcher(sourceignore.ReadPatterns(strings.NewReader(t.Ignore), nil), nil)
	rel := filepath.Clean(t.Path)
	err = filepath.WalkDir(filepath.Join(repoRoot, rel), func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		if r != "." && ignored.Match(strings.Split(filepath.ToSlash(r), "/"), e.IsDir()) {
			if e.IsDir() {
				return filepath.SkipDir
			}
			if ext := filepath.Ext(r); ext == ".yaml" || ext == ".yml" || e.Name() == "Kustomization" {
				leftOut = append(leftOut, filepath.ToSlash(r))
			}
			return nil
		}
		if e.IsDir() || !e.Type().IsRegular() {
			return nil
		}
		if err := os.MkdirAll(filepath.Join(snap, filepath.Dir(r)), 0o755); err != nil {
			return err
		}
		return source.CopyTree(path, filepath.Join(snap, r))
	})
	if err != nil {
		return nil, nil, fmt.Errorf("the workload clusters of the checkout: %w", err)
	}
	b, err := kustomize.NewBuilder(snap)
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(filepath.Join(snap, rel)); errors.Is(err, fs.ErrNotExist) {
		return nil, leftOut, nil // nothing of the directory is in the artifact
	}
	objs, err = b.Build(ctx, t.Kustomization)
	return objs, leftOut, err
}

type releaseFile struct {
	file   string
	values values.Layer
}

// releaseFiles finds the HelmRelease documents of a tenant's directory, by name, with the lines of
// their values.
func releaseFiles(repoRoot, dir string) (map[string]releaseFile, error) {
	out := map[string]releaseFile{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (!strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		rel = filepath.ToSlash(rel)
		dec := yamlv3.NewDecoder(strings.NewReader(string(data)))
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
			if doc.Content[0].Decode(&head) != nil || head.Kind != "HelmRelease" {
				continue
			}
			var l values.Layer
			if node := child(doc.Content[0], "spec", "values"); node != nil {
				if l, err = values.NodeLayer(rel, node, false); err != nil {
					return err
				}
			} else {
				l = values.FromMap(rel, map[string]any{})
			}
			out[head.Metadata.Name] = releaseFile{file: rel, values: l}
		}
		return nil
	})
	return out, err
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
