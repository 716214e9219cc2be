#!/usr/bin/env bash
# The whole test suite, as CI runs it: deps, vet, unit tests, then the integration tests against the local
# cluster. A cluster that was already running is used and left running; one this script started is stopped
# on every exit path.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/cluster/lib.sh
T0=$(date +%s)
step() { echo "=== [$(( $(date +%s) - T0 ))s] $*"; }

step "deps"; hack/deps.sh
step "build"; make --no-print-directory build
# One architecture per other OS: what breaks a cross-build is an OS-specific import or file, and each target
# compiles the whole dependency tree cold (about 8 minutes each on 2 cores); `make cross` builds all four.
step "cross-compile"
for target in darwin/arm64 windows/amd64; do
  CGO_ENABLED=0 GOOS=${target%/*} GOARCH=${target#*/} go build -o /dev/null ./cmd/devtool
done
step "vet"; make --no-print-directory vet
step "unit tests"; go test -race -count=1 ./... 2>&1 | tee /tmp/devtool-unit.log
# 20 s per target keeps the seeds and a short search as a regression guard; `make fuzz` searches longer.
step "fuzz"; FUZZTIME=${FUZZTIME:-20s} hack/fuzz.sh 2>&1 | tee /tmp/devtool-fuzz.log

# DEVTOOL_TEST_KUBECONFIG points the integration tests at another cluster; otherwise they use the local one.
if [ -z "${DEVTOOL_TEST_KUBECONFIG:-}" ]; then
  if ! [ -f "$KUBECONFIG_OUT" ] || ! kubectl --kubeconfig "$KUBECONFIG_OUT" get --raw /readyz >/dev/null 2>&1; then
    step "cluster up"
    trap 'step "cluster down"; hack/cluster/down.sh >/dev/null' EXIT
    hack/cluster/up.sh
  fi
  export DEVTOOL_TEST_KUBECONFIG=$KUBECONFIG_OUT
fi
# The platform server (2 replicas) for the platform's integration and e2e tests: they find it through
# $STATE/platform-url, platform-ca.crt and platform-admin-token. Previews sleep and expire soon, so that
# TestPreviews sees both happen (the defaults are hours).
step "platform up"
KUBECONFIG=$DEVTOOL_TEST_KUBECONFIG PLATFORM_PREVIEW_SLEEP_AFTER=${PLATFORM_PREVIEW_SLEEP_AFTER:-75s} \
  PLATFORM_PREVIEW_TTL=${PLATFORM_PREVIEW_TTL:-4m} hack/platform.sh up
step "integration tests"
go test -tags integration -count=1 -timeout 40m ./... 2>&1 | tee /tmp/devtool-integration.log
step "done"
