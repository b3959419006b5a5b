// Package kustomize builds a Flux Kustomization offline with the code kustomize-controller runs:
// fluxcd/pkg/kustomize generates the overlay from the Kustomization's spec (patches, images,
// components, targetNamespace, ...), builds it with krusty, and applies the postBuild
// substitutions.
package kustomize

import (
	"context"
	"fmt"
	"os"

	securejoin "github.com/cyphar/filepath-securejoin"
	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Build renders the Kustomization ks against root, a snapshot of its source artifact. root is
// modified while building (the overlay is generated next to the sources, as in the controller)
// and restored before returning, so builds must not run concurrently on the same root.
func Build(ctx context.Context, root string, ks *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	path, _, _ := unstructured.NestedString(ks.Object, "spec", "path")
	dirPath, err := securejoin.SecureJoin(root, path)
	if err != nil {
		return nil, fmt.Errorf("kustomization %s: path %q: %w", ks.GetName(), path, err)
	}
	if _, err := os.Stat(dirPath); err != nil {
		return nil, fmt.Errorf("kustomization %s: path %q not found in the source", ks.GetName(), path)
	}

	gen := fluxkustomize.NewGenerator(root, *ks)
	action, err := gen.WriteFile(dirPath, fluxkustomize.WithSaveOriginalKustomization())
	if err != nil {
		return nil, fmt.Errorf("kustomization %s: generate overlay: %w", ks.GetName(), err)
	}
	defer func() { _ = fluxkustomize.CleanDirectory(dirPath, action) }()

	resMap, err := fluxkustomize.SecureBuild(root, dirPath, false)
	if err != nil {
		return nil, fmt.Errorf("kustomization %s: kustomize build: %w", ks.GetName(), err)
	}

	_, hasPostBuild, _ := unstructured.NestedMap(ks.Object, "spec", "postBuild")
	var out []*unstructured.Unstructured
	for _, res := range resMap.Resources() {
		if hasPostBuild {
			// Offline there are no ConfigMaps or Secrets to read substituteFrom variables from
			// (dry run); the Kustomization's inline variables are substituted.
			if _, err := fluxkustomize.SubstituteVariables(ctx, nil, *ks, res,
				fluxkustomize.SubstituteWithDryRun(true)); err != nil {
				return nil, fmt.Errorf("kustomization %s: post build of %s/%s: %w", ks.GetName(), res.GetKind(), res.GetName(), err)
			}
		}
		data, err := res.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomization %s: %s/%s: %w", ks.GetName(), res.GetKind(), res.GetName(), err)
		}
		// Through JSON, so that the object holds the types the API machinery expects (int64, ...).
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("kustomization %s: %s/%s: %w", ks.GetName(), res.GetKind(), res.GetName(), err)
		}
		out = append(out, obj)
	}
	return out, nil
}
