// Package kustomize builds Flux Kustomizations offline with the code kustomize-controller runs:
// fluxcd/pkg/kustomize generates the overlay from the Kustomization's spec (patches, images,
// components, targetNamespace, ...), krusty builds it with the controller's options on the
// controller's secure filesystem, fluxcd/pkg/kustomize applies the postBuild substitutions, and
// fluxcd/pkg/ssa the commonMetadata, as the controller does before it applies.
//
// A Builder builds against one source tree. Unlike the controller it never writes into that tree
// (the generated kustomization.yaml lives in an in-memory layer over it, flux's own
// filesys.MakeFsInMemory), so builds run in parallel; and it keeps every result by content, so
// that the same unit rendered in several contexts is built once.
package kustomize

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	securejoin "github.com/cyphar/filepath-securejoin"
	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	fluxfs "github.com/fluxcd/pkg/kustomize/filesys"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/yaml"
)

// kyaml keeps its OpenAPI schema in package state. kustomize-controller resets it before every
// build (under a lock that serializes builds) so that a kustomization's `openapi:` field cannot
// leak into the next build. A tree whose kustomizations set no such field always builds with the
// built-in schema: it is loaded once and builds share it, read-only. A tree that sets one takes
// the controller's own serialized path, with every shared build held off meanwhile.
var (
	builtinSchema sync.Once
	schemaUse     sync.RWMutex
)

// Builder builds Kustomizations against one source tree, which must not change while it is used.
// It is safe for concurrent use.
type Builder struct {
	root string
	// customSchema: a kustomization of the tree sets `openapi:`; builds take the controller's path.
	customSchema bool
	// disk, if set, keeps builds across processes.
	disk *diskCache

	mu    sync.Mutex
	cache map[string]*result
}

// Option configures a Builder.
type Option func(*Builder) error

// WithDiskCache also keeps every build in dir, keyed by the content of the whole tree, the
// Kustomization and the versions of the build libraries, so that a later process building the same
// thing from the same tree reads it back instead.
func WithDiskCache(dir string) Option {
	return func(b *Builder) error {
		d, err := newDiskCache(dir, b.root)
		if err != nil {
			return err
		}
		b.disk = d
		return nil
	}
}

type result struct {
	done chan struct{}
	objs []*unstructured.Unstructured
	err  error
}

// NewBuilder returns a builder for the tree at root (a snapshot of the source artifact).
func NewBuilder(root string, opts ...Option) (*Builder, error) {
	custom, err := setsOpenAPI(root)
	if err != nil {
		return nil, err
	}
	b := &Builder{root: root, customSchema: custom, cache: map[string]*result{}}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Build renders ks against the builder's tree. The objects are the caller's to change.
func (b *Builder) Build(ctx context.Context, ks *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	key, err := cacheKey(ks)
	if err != nil {
		return nil, err
	}
	return b.kept(ctx, key, func(ctx context.Context) ([]*unstructured.Unstructured, error) { return b.build(ctx, ks) })
}

// kept returns the result kept under key, computing it once (in the process, and with a disk
// cache across processes). The objects are the caller's to change.
func (b *Builder) kept(ctx context.Context, key string, compute func(context.Context) ([]*unstructured.Unstructured, error)) ([]*unstructured.Unstructured, error) {
	b.mu.Lock()
	r, seen := b.cache[key]
	if !seen {
		r = &result{done: make(chan struct{})}
		b.cache[key] = r
	}
	b.mu.Unlock()
	if !seen {
		r.objs, r.err = b.computeOrRead(ctx, key, compute)
		close(r.done)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	out := make([]*unstructured.Unstructured, len(r.objs))
	for i, o := range r.objs {
		out[i] = o.DeepCopy()
	}
	return out, nil
}

// Keep computes what depends on the tree only (nothing else), once per process and, with a disk
// cache, once per tree: name tells results apart.
func (b *Builder) Keep(ctx context.Context, name string, compute func() ([]*unstructured.Unstructured, error)) ([]*unstructured.Unstructured, error) {
	return b.kept(ctx, "keep\x00"+name, func(context.Context) ([]*unstructured.Unstructured, error) { return compute() })
}

// cacheKey is what a build depends on besides the tree: the Kustomization's name, namespace and
// spec.
func cacheKey(ks *unstructured.Unstructured) (string, error) {
	spec, _, _ := unstructured.NestedFieldNoCopy(ks.Object, "spec")
	data, err := json.Marshal([]any{ks.GetName(), ks.GetNamespace(), spec})
	if err != nil {
		return "", fmt.Errorf("kustomization %s: %w", ks.GetName(), err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// computeOrRead reads the result from the disk cache, or computes it and keeps it there.
func (b *Builder) computeOrRead(ctx context.Context, key string, compute func(context.Context) ([]*unstructured.Unstructured, error)) ([]*unstructured.Unstructured, error) {
	if b.disk == nil {
		return compute(ctx)
	}
	if objs, ok := b.disk.read(key); ok {
		return objs, nil
	}
	objs, err := compute(ctx)
	if err == nil {
		b.disk.write(key, objs)
	}
	return objs, err
}

func (b *Builder) build(ctx context.Context, ks *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	path, _, _ := unstructured.NestedString(ks.Object, "spec", "path")
	dirPath, err := securejoin.SecureJoin(b.root, path)
	if err != nil {
		return nil, fmt.Errorf("kustomization %s: path %q: %w", ks.GetName(), path, err)
	}
	if _, err := os.Stat(dirPath); err != nil {
		return nil, fmt.Errorf("kustomization %s: path %q not found in the source", ks.GetName(), path)
	}

	manifest, kfile, _, err := fluxkustomize.NewGenerator(b.root, *ks).GenerateManifest(dirPath)
	if err != nil {
		return nil, fmt.Errorf("kustomization %s: generate overlay: %w", ks.GetName(), err)
	}
	resMap, err := b.kustomize(dirPath, kfile, manifest)
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
		// The decoded node through JSON, as RNode.MarshalJSON gives it but without printing the
		// node and parsing it again, so that the object holds the types the API machinery expects
		// (int64, timestamps as strings).
		m, err := res.Map()
		if err != nil {
			return nil, fmt.Errorf("kustomization %s: %s/%s: %w", ks.GetName(), res.GetKind(), res.GetName(), err)
		}
		data, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("kustomization %s: %s/%s: %w", ks.GetName(), res.GetKind(), res.GetName(), err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("kustomization %s: %s/%s: %w", ks.GetName(), res.GetKind(), res.GetName(), err)
		}
		out = append(out, obj)
	}
	// What the controller sets on every object it applies (a tenant's shard label, among others).
	labels, _, _ := unstructured.NestedStringMap(ks.Object, "spec", "commonMetadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(ks.Object, "spec", "commonMetadata", "annotations")
	if len(labels) > 0 || len(annotations) > 0 {
		ssautil.SetCommonMetadata(out, labels, annotations)
	}
	return out, nil
}

// kustomize runs krusty on the tree with the generated kustomization file in memory over it.
func (b *Builder) kustomize(dirPath, kfile string, manifest []byte) (resmap.ResMap, error) {
	disk, err := fluxfs.MakeFsOnDiskSecure(b.root)
	if err != nil {
		return nil, err
	}
	layered := fluxfs.MakeFsInMemory(disk)
	if err := layered.WriteFile(kfile, manifest); err != nil {
		return nil, err
	}
	if b.customSchema {
		schemaUse.Lock()
		defer schemaUse.Unlock()
		return fluxkustomize.Build(layered, dirPath)
	}
	builtinSchema.Do(func() { _ = openapi.Schema() })
	schemaUse.RLock()
	defer schemaUse.RUnlock()
	return krustyBuild(layered, dirPath)
}

// krustyBuild is fluxkustomize.Build without the per-build schema reset: the same kustomizer
// options, and a recovered panic reported as an error.
func krustyBuild(fsys filesys.FileSystem, dirPath string) (res resmap.ResMap, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recovered from kustomize build panic: %v", r)
		}
	}()
	return krusty.MakeKustomizer(&krusty.Options{
		LoadRestrictions: kustypes.LoadRestrictionsNone,
		PluginConfig:     kustypes.DisabledPluginConfig(),
	}).Run(fsys, dirPath)
}

// setsOpenAPI tells whether a kustomization file of the tree sets the `openapi` field.
func setsOpenAPI(root string) (bool, error) {
	names := konfig.RecognizedKustomizationFileNames()
	found := false
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || found || d.IsDir() {
			return err
		}
		match := false
		for _, n := range names {
			match = match || d.Name() == n
		}
		if !match {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), "openapi") {
			return nil
		}
		var k struct {
			OpenAPI map[string]any `json:"openapi"`
		}
		if err := yaml.Unmarshal(data, &k); err == nil && len(k.OpenAPI) > 0 {
			found = true
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("scan the kustomizations of %s: %w", root, err)
	}
	return found, nil
}
