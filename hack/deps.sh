#!/usr/bin/env bash
# Install everything the build and the tests need on a fresh machine: Debian packages, Go modules,
# the local cluster's binaries (cached by version) and any other test tools under hack/*/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1; then
  echo "deps: Go is not installed (need Go 1.24 or newer on PATH)" >&2; exit 1
fi
go mod download
hack/cluster/build.sh
for b in hack/*/build.sh; do
  [ "$b" = hack/cluster/build.sh ] || "$b"
done
