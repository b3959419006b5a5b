#!/usr/bin/env bash
# Lint: formatting, shellcheck on every shell script of tools/, ci/ and .ci/, golangci-lint
# (.golangci.yml: go vet, staticcheck, a function-length limit, ...), and the
# generated API files (CRD, deep copies) up to date with the Go types they are generated from,
# and docs/cli.md with the commands.
# Run from anywhere. Needs shellcheck (Debian's package; the pipeline installs it).
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l api cmd internal test tools)
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting:" >&2
  echo "$unformatted" >&2
  exit 1
fi

# The shell scripts, found rather than listed so that a new one is checked too: files named *.sh
# and files whose first line is a sh or bash shebang (tools/testbed/up, .ci/run, ...).
# .shellcheckrc (repository root) has shellcheck follow what they source, found from each
# script's directory.
command -v shellcheck >/dev/null || { echo "shellcheck not found: apt-get install shellcheck" >&2; exit 1; }
scripts=()
while IFS= read -r -d '' f; do
  first=""
  IFS= read -r first <"$f" || true
  if [[ $f == *.sh || $first =~ ^\#!.*/(env[[:space:]]+)?(ba)?sh([[:space:]]|$) ]]; then scripts+=("$f"); fi
done < <(find tools ci .ci -name node_modules -prune -o -type f -print0 | LC_ALL=C sort -z)
echo "shellcheck $(shellcheck --version | sed -n 's/^version: //p'): ${#scripts[@]} scripts"
shellcheck "${scripts[@]}"

# golangci-lint, pinned, with the linters of .golangci.yml (go vet's among them), built once into
# the cache from the Go module proxy.
golangci_version=v2.15.0
gcl_dir=${XDG_CACHE_HOME:-$HOME/.cache}/cluster-init/ci-tools/golangci-lint-$golangci_version
if [[ ! -x $gcl_dir/golangci-lint ]]; then
  echo "installing golangci-lint $golangci_version into $gcl_dir"
  GOBIN=$gcl_dir go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$golangci_version"
fi
"$gcl_dir/golangci-lint" version
"$gcl_dir/golangci-lint" run ./...

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
# docs/cli.md is generated from the commands (cobra's generator), like the CRD from the types.
go run ./cmd/bootstrap gen-cli-doc "$scratch/cli.md"
if ! diff -u docs/cli.md "$scratch/cli.md" >&2; then
  echo "docs/cli.md is out of date: run \`go run ./cmd/bootstrap gen-cli-doc docs/cli.md\` and commit the result" >&2
  exit 1
fi
echo "lint: ok"
