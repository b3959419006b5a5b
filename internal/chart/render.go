// Package chart renders Helm charts offline with the Helm SDK, the way helm-controller installs
// them: the same values coalescing, schema validation, template engine and manifest ordering,
// but client-side only (like `helm template`), so nothing touches a cluster.
package chart

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/ssa/utils"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/engine"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
)

// Release names the release a chart is rendered as.
type Release struct {
	Name      string
	Namespace string
	// KubeVersion is the Kubernetes version templates see in .Capabilities (e.g. "v1.37.0").
	KubeVersion string
}

// Document is one object of a rendered chart and the template that produced it.
type Document struct {
	Template string
	Object   *unstructured.Unstructured
}

// Render loads the chart in dir and renders it with values, as an install of rel would.
// Values are validated against the chart's values.schema.json by Helm itself.
func Render(ctx context.Context, dir string, rel Release, values map[string]any) ([]Document, error) {
	return render(ctx, dir, rel, values, false)
}

// render is Render; skipSchema renders as a HelmRelease with disableSchemaValidation would, which
// the tests use to show that the templates alone never turn a value into structure.
func render(ctx context.Context, dir string, rel Release, values map[string]any, skipSchema bool) ([]Document, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}

	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = rel.Name
	install.Namespace = rel.Namespace
	install.Replace = true
	install.IncludeCRDs = true
	install.SkipSchemaValidation = skipSchema
	if rel.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(rel.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("render chart %s: kube version %q: %w", dir, rel.KubeVersion, err)
		}
		install.KubeVersion = kv
	}

	r, err := install.RunWithContext(ctx, chrt, values)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", dir, err)
	}
	out, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("render chart %s: unexpected release type %T", dir, r)
	}

	docs, err := parseManifest(out.Manifest)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", dir, err)
	}
	for _, h := range out.Hooks {
		hookDocs, err := parseManifest("# Source: " + h.Path + "\n" + h.Manifest)
		if err != nil {
			return nil, fmt.Errorf("render chart %s: hook %s: %w", dir, h.Path, err)
		}
		docs = append(docs, hookDocs...)
	}
	return docs, nil
}

// parseManifest splits a release manifest into objects, keeping the "# Source:" of each.
func parseManifest(manifest string) ([]Document, error) {
	split := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(split))
	for k := range split {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))

	var docs []Document
	for _, k := range keys {
		text := split[k]
		source := ""
		for _, line := range strings.Split(text, "\n") {
			if s, ok := strings.CutPrefix(line, "# Source: "); ok {
				source = s
				break
			}
		}
		objs, err := utils.ReadObjects(strings.NewReader(text))
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", source, err)
		}
		for _, o := range objs {
			docs = append(docs, Document{Template: source, Object: o})
		}
	}
	return docs, nil
}

// RenderAgainst renders the chart in dir as an upgrade of rel on the cluster of cfg would, with
// the templates' lookups answered by that cluster: what a chart refuses from the objects already
// there (a Kubernetes version step) shows here as it does in helm-controller, and nothing is sent.
// Values are validated against the chart's schema.
func RenderAgainst(dir string, rel Release, values map[string]any, cfg *rest.Config) ([]Document, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	caps := *common.DefaultCapabilities
	if rel.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(rel.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("render chart %s: kube version %q: %w", dir, rel.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	top, err := util.ToRenderValuesWithSchemaValidation(chrt, values,
		common.ReleaseOptions{Name: rel.Name, Namespace: rel.Namespace, IsUpgrade: true, Revision: 2}, &caps, false)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", dir, err)
	}
	files, err := engine.RenderWithClient(chrt, top, cfg)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", dir, err)
	}
	var manifest strings.Builder
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(name, ".yaml") && strings.TrimSpace(files[name]) != "" {
			fmt.Fprintf(&manifest, "---\n# Source: %s\n%s\n", name, files[name])
		}
	}
	return parseManifest(manifest.String())
}
