#!/usr/bin/env bash
# Build (or find cached) the image-build test tools, from the Go module proxy and Debian packages only:
#   buildkitd + buildctl  $BUILDKIT_VERSION, into $CACHE/buildkit-$BUILDKIT_VERSION/ (reused while present:
#                         a warm machine never rebuilds)
#   docker.io, runc       Debian packages (the private dockerd of the build integration tests; runc for
#                         buildkitd's OCI worker). Installing them starts no daemon.
# Tests find the binaries through DEVTOOL_BUILDKIT_BIN (a folder) or this cache path; `hack/buildkit/build.sh --print-bin`
# prints the folder.
set -euo pipefail
BUILDKIT_VERSION=${BUILDKIT_VERSION:-v0.33.1}   # newest the module proxy serves with all its dependencies
CACHE=${DEVTOOL_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/devtool-tools}
OUT=$CACHE/buildkit-$BUILDKIT_VERSION
if [ "${1:-}" = --print-bin ]; then echo "$OUT"; exit 0; fi

apt_deps() {
  local pkgs="docker.io runc busybox-static" missing="" p
  for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "hack/buildkit: installing Debian packages ($missing) needs root" >&2; exit 1
  fi
  apt-get update -qq
  # policy-rc.d / no systemd here: docker.io's postinst does not start a system dockerd. Stop one if it did.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now docker.service docker.socket >/dev/null 2>&1 || true; fi
}

build_buildkit() {
  if [ -x "$OUT/buildkitd" ] && [ -x "$OUT/buildctl" ]; then
    echo "hack/buildkit: buildkit $BUILDKIT_VERSION cached in $OUT"; return 0
  fi
  export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
  mkdir -p "$CACHE/src"
  # `go install pkg@version` refuses buildkit (its go.mod has exclude directives): build in a copy of the module.
  local dir src=$CACHE/src/buildkit-$BUILDKIT_VERSION
  if [ ! -d "$src" ]; then
    # outside any module, so the repository's go.mod and go.sum are never touched
    dir=$(cd "$CACHE/src" && go mod download -json "github.com/moby/buildkit@$BUILDKIT_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    rm -rf "$src.tmp"; cp -r "$dir" "$src.tmp"; chmod -R u+w "$src.tmp"; mv "$src.tmp" "$src"
  fi
  local v="-s -w -X github.com/moby/buildkit/version.Version=$BUILDKIT_VERSION -X github.com/moby/buildkit/version.Package=github.com/moby/buildkit"
  mkdir -p "$OUT.tmp"
  ( cd "$src"
    echo "hack/buildkit: building buildkitd + buildctl $BUILDKIT_VERSION (takes a few minutes on 2 cores)"
    go build -trimpath -ldflags "$v" -o "$OUT.tmp/buildctl" ./cmd/buildctl
    go build -trimpath -ldflags "$v" -o "$OUT.tmp/buildkitd" ./cmd/buildkitd )
  rm -rf "$OUT"; mv "$OUT.tmp" "$OUT"
  echo "hack/buildkit: built into $OUT"
}

apt_deps
build_buildkit
