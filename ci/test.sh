#!/usr/bin/env bash
# The test suite: lint, then every Go test: real Helm rendering, kustomize builds, schema
# validation of every rendered object, a byte-for-byte check of the vendored manifests against
# their pinned module sources, and a real kube-apiserver and etcd (envtest) for the packages
# that talk to clusters. Needs Go, jq and the Go module proxy; the envtest binaries are built
# from the pinned Kubernetes sources on first use and cached (tools/testbed/envtest-assets).
# The end-to-end tests on the test bed are separate (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."

ci/lint.sh
KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$(tools/testbed/envtest-assets)}
export KUBEBUILDER_ASSETS
go test -count=1 -timeout 30m ./...
