#!/usr/bin/env bash
# Lint: formatting, go vet, and the generated API files (CRD, deep copies) up to date with the
# Go types they are generated from. Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l api cmd internal tools)
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...

# controller-gen (pinned in api/apps/v1alpha1's go:generate line) writes into a copy of what it
# reads, compared with the checkout: no git state needed, nothing of the checkout changed.
generated=(api kustomize-components/applications/crd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/tree/kustomize-components/applications"
cp -r go.mod go.sum api "$scratch/tree/"
(cd "$scratch/tree" && go generate ./api/...)
for dir in "${generated[@]}"; do
  if ! diff -r "$dir" "$scratch/tree/$dir" >/dev/null; then
    echo "generated files out of date in $dir: run \`go generate ./api/...\` and commit the result" >&2
    diff -r "$dir" "$scratch/tree/$dir" >&2 || true
    exit 1
  fi
done
echo "lint: ok"
