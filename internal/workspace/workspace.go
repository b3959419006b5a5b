// Package workspace is what a command works on: a cluster-init checkout, its pinned versions, one
// environment of it, and the extra values files given with --values; and how it is rendered
// (the build cache of statedir).
package workspace

import (
	"context"
	"fmt"
	"path/filepath"

	"cluster-init.dev/cluster-init/internal/boundedfile"
	"cluster-init.dev/cluster-init/internal/checkout"
	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/secrets"
	"cluster-init.dev/cluster-init/internal/statedir"
	"cluster-init.dev/cluster-init/internal/values"
	"cluster-init.dev/cluster-init/internal/versions"
)

// Workspace is a checkout and one environment of it.
type Workspace struct {
	Root      string
	Pins      versions.Pins
	Env       *environment.Environment
	Overrides []values.Layer
}

// Open loads environment envName (a directory of environment-values/ or a path) of the checkout
// at root, its secrets decrypted with key (nil if none).
func Open(root, envName string, key *secrets.Key) (*Workspace, error) {
	pins, err := versions.Load(root)
	if err != nil {
		return nil, err
	}
	name, dir, err := environment.Resolve(root, envName)
	if err != nil {
		return nil, err
	}
	env, err := environment.Load(name, dir, func(p string) string { return checkout.Relative(root, p) }, key)
	if err != nil {
		return nil, err
	}
	return &Workspace{Root: root, Pins: pins, Env: env}, nil
}

// AddValuesFiles reads the --values files, in order, after the environment's values, and
// returns the secret values they hold (for the redactor).
func (w *Workspace) AddValuesFiles(files []string) (secretValues []string, err error) {
	for _, path := range files {
		abs, err := filepath.Abs(path)
		if err != nil {
			abs = path
		}
		display := checkout.Relative(w.Root, abs)
		data, err := boundedfile.ReadFile(path, display, boundedfile.Values)
		if err != nil {
			return secretValues, fmt.Errorf("--values: %w", err)
		}
		l, err := values.ParseLayer(display, data, false)
		if err != nil {
			return secretValues, err
		}
		w.Overrides = append(w.Overrides, l)
		secretValues = append(secretValues, w.Env.SecretValues(l)...)
	}
	return secretValues, nil
}

// Rel is how messages show a path of the checkout.
func (w *Workspace) Rel(p string) string { return checkout.Relative(w.Root, p) }

// RenderOptions renders the environment with the --values files in context (the bootstrap
// cluster's when "").
func (w *Workspace) RenderOptions(context string) render.Options {
	if context == "" {
		context = render.ContextBootstrap
	}
	return render.Options{Env: w.Env, Context: context, Overrides: w.Overrides}
}

// Renderer renders the workspace's checkout; the caller closes it.
func (w *Workspace) Renderer() (*render.Renderer, error) { return NewRenderer(w.Root, w.Pins) }

// NewRenderer renders from a snapshot of the checkout at root, with the build cache.
func NewRenderer(root string, pins versions.Pins) (*render.Renderer, error) {
	return render.New(root, pins["KUBERNETES_VERSION"], statedir.BuildCache())
}

// Render renders the environment once, in context.
func (w *Workspace) Render(ctx context.Context, context string) (*render.Result, error) {
	r, err := w.Renderer()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Render(ctx, w.RenderOptions(context))
}

// Settings reads the names and choices of the environment's values in the bootstrap context,
// without checking them: for the commands that must work whatever the values.
func (w *Workspace) Settings() (values.Settings, error) {
	return render.Unchecked(w.Root, w.RenderOptions(render.ContextBootstrap))
}
