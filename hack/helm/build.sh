#!/usr/bin/env bash
# Build (or find cached) helm for the pipeline runner's image, from the Go module proxy only:
#   helm $HELM_VERSION (static, CGO_ENABLED=0) into $CACHE/helm-$HELM_VERSION/ (a warm machine never rebuilds;
#   about 5 minutes cold on 2 cores). hack/platform.sh passes it to the install (--runner-helm) when present.
# `hack/helm/build.sh --print-bin` prints the folder.
set -euo pipefail
HELM_VERSION=${HELM_VERSION:-v3.18.4}   # builds from the proxy with Go 1.26 (checked); v3.18 pairs with Kubernetes 1.32-1.33
CACHE=${DEVTOOL_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/devtool-tools}
OUT=$CACHE/helm-$HELM_VERSION
if [ "${1:-}" = --print-bin ]; then echo "$OUT"; exit 0; fi
if [ -x "$OUT/helm" ]; then echo "hack/helm: helm $HELM_VERSION cached in $OUT"; exit 0; fi
mkdir -p "$OUT"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "hack/helm: building helm $HELM_VERSION (go install from the module proxy)"
(cd "$tmp" && CGO_ENABLED=0 GOBIN=$tmp/bin GOFLAGS=-mod=mod go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
mv "$tmp/bin/helm" "$OUT/helm"
echo "hack/helm: helm $HELM_VERSION in $OUT"
