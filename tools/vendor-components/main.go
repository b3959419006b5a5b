// Command vendor-components regenerates the upstream manifests vendored under
// kustomize-components/*/upstream/ (and the previous Cluster API set in
// kustomize-components/*/upstream-previous/) from the Go module sources of the versions pinned in
// tools/versions.env. It reproduces what each project's release does (kustomize builds, the
// clusterctl processing of provider components, Helm rendering of cert-manager, Flux's install
// generator), offline but for the Go module proxy.
//
//	go run ./tools/vendor-components          # rewrite the vendored manifests
//	go run ./tools/vendor-components -check   # fail if they differ from the files in the tree
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"
)

func main() {
	root := flag.String("root", ".", "repository root")
	check := flag.Bool("check", false, "compare with the vendored files instead of writing them")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()

	if err := run(ctx, *root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "vendor-components:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root string, check bool) error {
	outputs, err := generate(ctx, root, func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	})
	if err != nil {
		return err
	}
	if check {
		var stale []string
		for _, o := range outputs {
			current, err := os.ReadFile(filepath.Join(root, o.Path))
			if err != nil || string(current) != string(o.Content) {
				stale = append(stale, o.Path)
			}
		}
		if len(stale) > 0 {
			return fmt.Errorf("vendored manifests differ from their sources, run `go run ./tools/vendor-components`: %v", stale)
		}
		fmt.Fprintf(os.Stderr, "%d vendored manifests match their sources\n", len(outputs))
		return nil
	}
	for _, o := range outputs {
		path := filepath.Join(root, o.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", o.Path, err)
		}
		if err := os.WriteFile(path, o.Content, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", o.Path, err)
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", o.Path)
	}
	return nil
}
