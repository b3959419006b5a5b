#!/usr/bin/env bash
# The platform repository's guard: every environment, with its committed workload clusters and
# applications, validated offline by the built binary (no Go toolchain), as a merge request's
# pipeline runs it. An environment with SOPS-encrypted secrets needs the age key: a file variable
# SOPS_AGE_KEY_FILE (or SOPS_AGE_KEY) of the project.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${BOOTSTRAP_BIN:-bin/bootstrap}
[[ -x $bin ]] || { echo "$bin: missing: expected the binary of the build job (ci/build.sh binary)" >&2; exit 1; }
start=$(date +%s%N)
"$bin" validate --all
echo "validated in $(( ($(date +%s%N) - start) / 1000000 )) ms"
