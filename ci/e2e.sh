#!/usr/bin/env bash
# End to end on the offline test bed (needs a machine that can run a Docker engine, root): build
# the test bed, run the end-to-end tests, tear the test bed down (the cache stays).
set -euo pipefail
cd "$(dirname "$0")/.."

tools/testbed/up --no-cluster
trap 'tools/testbed/down' EXIT
go test -tags e2e -count=1 -timeout 3h -v ./test/e2e
