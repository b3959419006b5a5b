#!/usr/bin/env bash
# Lint: formatting and go vet. Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l cmd internal tools)
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
echo "lint: ok"
