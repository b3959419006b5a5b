#!/usr/bin/env bash
# The test suite: lint, then every Go test (real Helm rendering, kustomize builds, schema
# validation of every rendered object, byte-for-byte check of the vendored manifests against
# their pinned module sources). Needs Go and the Go module proxy; nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."

ci/lint.sh
go test -count=1 -timeout 30m ./...
