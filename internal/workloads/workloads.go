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
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kustomize"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/source"
	"cluster-init.dev/cluster-init/internal/values"
)

// PolicyName is the admission policy of the tenants' HelmReleases (charts/workload-clusters).
const PolicyName = "cluster-init-workload-clusters"

// Tenant is a namespace of workload clusters and the Kustomization that applies its directory.
type Tenant struct {
	Namespace     string
	Path          string
	Kustomization *unstructured.Unstructured
	// Platform is what its clusters share with the management cluster (a valuesFrom layer).
	Platform values.Layer
}

// Cluster is one workload cluster committed to a tenant's directory.
type Cluster struct {
	Name   string
	Tenant *Tenant
	// File is the file of its HelmRelease, relative to the repository.
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
	policy   []*cel.Ast
	messages []string
	env      *cel.Env
}

// Read finds the tenants in a render of the management cluster (its workload-clusters unit) and
// builds their directories of the checkout at repoRoot.
func Read(ctx context.Context, repoRoot string, management *render.Result) (*Plan, error) {
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
		return p, nil
	}
	for _, t := range p.Tenants {
		for _, o := range management.Objects {
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
	if err := p.compilePolicy(policy); err != nil {
		return nil, err
	}

	// The tenants' directories, as kustomize-controller builds them from the repository.
	snap, err := os.MkdirTemp("", "cluster-init-clusters-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(snap)
	if err := source.CopyTree(filepath.Join(repoRoot, "clusters"), filepath.Join(snap, "clusters")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the workload clusters of the checkout: %w", err)
	}
	b, err := kustomize.NewBuilder(snap)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, t := range p.Tenants {
		dir := filepath.Join(repoRoot, filepath.Clean(t.Path))
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			continue // no workload cluster committed yet
		}
		built, err := b.Build(ctx, t.Kustomization)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", strings.TrimPrefix(t.Path, "./"), err))
			continue
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

// compilePolicy compiles the validations of the admission policy.
func (p *Plan) compilePolicy(policy *unstructured.Unstructured) error {
	if policy == nil {
		return errors.New("the workload-clusters unit renders no admission policy " + PolicyName)
	}
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType))
	if err != nil {
		return err
	}
	p.env = env
	validations, _, _ := unstructured.NestedSlice(policy.Object, "spec", "validations")
	for _, v := range validations {
		m, _ := v.(map[string]any)
		expr, _ := m["expression"].(string)
		msg, _ := m["message"].(string)
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			return fmt.Errorf("admission policy %s: %q: %w", PolicyName, expr, iss.Err())
		}
		p.policy = append(p.policy, ast)
		p.messages = append(p.messages, msg)
	}
	return nil
}

// Admit evaluates the admission policy on a cluster's HelmRelease, as the API server will.
func (p *Plan) Admit(c *Cluster) error {
	var refused []string
	for i, ast := range p.policy {
		prg, err := p.env.Program(ast)
		if err != nil {
			return err
		}
		out, _, err := prg.Eval(map[string]any{"object": c.Release.Object})
		if err != nil || out.Value() != true {
			refused = append(refused, p.messages[i])
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%s: HelmRelease %s is refused by the admission policy %s: %s", c.File, c.Name, PolicyName, strings.Join(refused, "; "))
	}
	return nil
}

// Render renders a cluster's release as helm-controller will: the chart in the workload context,
// the platform's values, the tenant's values.
func (p *Plan) Render(ctx context.Context, r *render.Renderer, repoRoot string, c *Cluster) (*render.Result, error) {
	env := &environment.Environment{Name: filepath.ToSlash(filepath.Dir(c.File)), Dir: filepath.Join(repoRoot, filepath.Dir(c.File)), Layers: []values.Layer{c.Values}}
	return r.Render(ctx, render.Options{
		Env: env, Context: render.ContextWorkload, Platform: []values.Layer{c.Tenant.Platform},
		Release: c.Name, Namespace: c.Tenant.Namespace,
	})
}
