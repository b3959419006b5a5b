#!/usr/bin/env bash
# Build: the bootstrap binary and this project's image (needs a Docker engine).
set -euo pipefail
cd "$(dirname "$0")/.."

CGO_ENABLED=0 go build -trimpath -o bin/bootstrap ./cmd/bootstrap
tools/image/build
