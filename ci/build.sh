#!/usr/bin/env bash
# Build: the bootstrap binary (`binary`) and this project's image (`image`, needs a Docker
# engine); both when no argument is given.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-all}
case $what in
  binary|image|all) ;;
  *) echo "usage: ci/build.sh [binary|image|all]" >&2; exit 2 ;;
esac
if [[ $what != image ]]; then
  CGO_ENABLED=0 go build -trimpath -o bin/bootstrap ./cmd/bootstrap
fi
if [[ $what != binary ]]; then
  tools/image/build
fi
