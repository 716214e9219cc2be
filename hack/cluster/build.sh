#!/usr/bin/env bash
# Build (or find cached) everything the local cluster needs, from Debian packages and the Go module proxy only.
# Usage: hack/cluster/build.sh [component...]   (default: all)
# Binaries land in $CACHE/bin/k8s-<version>/ and are reused while present: a warm machine builds nothing.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
SRC=$CACHE/src/kubernetes-$K8S_VERSION
mkdir -p "$BIN" "$CACHE/src"
ALL="deps kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd images crirm local-path-provisioner coredns"
COMPONENTS=${*:-$ALL}

apt_deps() {
  local pkgs="containerd runc containernetworking-plugins busybox-static socat iptables conntrack gcc libc6-dev openssl curl iproute2 docker-registry"
  local missing="" p
  for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  [ -z "$missing" ] && return 0
  need_root "installing Debian packages ($missing)" cluster-build
  apt-get update -qq
  # docker-registry's postinst starts a system-wide registry on :5000; we run our own on loopback instead.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now docker-registry >/dev/null 2>&1 || true; fi
  pkill -x docker-registry 2>/dev/null || true
}

prepare_k8s() {
  [ -f "$SRC/.prepared" ] && return
  local dir; dir=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  rm -rf "$SRC"; cp -r "$dir" "$SRC"; chmod -R u+w "$SRC"
  # The module zip has no staging/ tree: point every k8s.io/* staging replace at the published v0.x module.
  ( cd "$SRC"; rm -rf go.work go.work.sum vendor
    sed -i -E "s#^\t(k8s\.io/[a-z-]+) => \./staging/src/k8s\.io/[a-z-]+#\t\1 => \1 v0${K8S_VERSION#v1}#" go.mod
    go mod download )
  touch "$SRC/.prepared"
}

k8s_ldflags() {
  local minor p; minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean -X %s.gitCommit=module-proxy ' \
      $p "$K8S_VERSION" $p $p "$minor" $p $p
  done
  echo "-s -w"
}

build_etcd() {
  # etcd's server module has relative replace directives, so `go install` refuses it: build a copy without them.
  local dir d=$CACHE/src/etcd-server-$ETCD_VERSION
  if [ ! -d "$d" ]; then
    dir=$(go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    cp -r "$dir" "$d.tmp"; chmod -R u+w "$d.tmp"
    ( cd "$d.tmp"; go mod edit $(go mod edit -json | sed -n 's/.*"Path": "\(go.etcd.io[^"]*\)".*/-dropreplace=\1/p' | sort -u) )
    mv "$d.tmp" "$d"
  fi
  ( cd "$d"; go build -ldflags "-s -w" -o "$1.tmp" . ) && mv "$1.tmp" "$1"
}

# mkimage NAME:TAG ROOTFS OUT.tar ENTRYPOINT-JSON CMD-JSON: a one-layer docker-archive ("docker save" format).
mkimage() {
  local t l c; t=$(mktemp -d)
  tar -C "$2" --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -cf "$t/layer.tar" .
  l=$(sha256sum "$t/layer.tar" | cut -d' ' -f1); mkdir "$t/$l"; mv "$t/layer.tar" "$t/$l/"
  printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":%s,"Cmd":%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$4" "$5" "$l" > "$t/c.json"
  c=$(sha256sum "$t/c.json" | cut -d' ' -f1); mv "$t/c.json" "$t/$c.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$c" "$1" "$l" > "$t/manifest.json"
  tar -C "$t" -cf "$3.tmp" manifest.json "$c.json" "$l" && mv "$3.tmp" "$3"; rm -rf "$t"
}

build_images() {
  # pause: upstream pause.c linked statically; busybox: Debian's busybox-static with every applet linked.
  local r; r=$(mktemp -d); mkdir -p "$r/pause" "$r/busybox/bin" "$r/busybox/etc" "$r/busybox/tmp" "$r/busybox/www"
  prepare_k8s
  gcc -Os -static -o "$r/pause/pause" "$SRC/build/pause/linux/pause.c"; strip "$r/pause/pause"
  cp /bin/busybox "$r/busybox/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$r/busybox/bin/$a"; done
  chmod 1777 "$r/busybox/tmp"
  echo 'root:x:0:0:root:/root:/bin/sh' > "$r/busybox/etc/passwd"; echo 'root:x:0:' > "$r/busybox/etc/group"
  echo 'hello from busybox httpd' > "$r/busybox/www/index.html"
  mkimage registry.k8s.io/pause:3.10 "$r/pause" "$BIN/pause.tar" '["/pause"]' null
  mkimage docker.io/library/busybox:local "$r/busybox" "$BIN/busybox.tar" null '["sh"]'
  rm -rf "$r"
}

for c in $COMPONENTS; do
  out=$BIN/$c
  case $c in images) out=$BIN/busybox.tar ;; deps) out="" ;; esac
  if [ -n "$out" ] && [ -e "$out" ]; then continue; fi   # cached
  start=$(date +%s)
  case $c in
    deps) apt_deps ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kubectl)
      prepare_k8s; ( cd "$SRC" && go build -ldflags "$(k8s_ldflags)" -o "$out.tmp" "./cmd/$c" ) && mv "$out.tmp" "$out" ;;
    etcd) build_etcd "$out" ;;
    images) build_images ;;
    crirm) ( cd "$HERE/crirm" && go build -o "$out.tmp" . ) && mv "$out.tmp" "$out" ;;
    local-path-provisioner) GOBIN=$BIN go install "github.com/rancher/local-path-provisioner@$LPP_VERSION" ;;
    coredns) GOBIN=$BIN go install "github.com/coredns/coredns@$COREDNS_VERSION" ;;
    *) echo "build.sh: unknown component $c (known: $ALL)" >&2; exit 2 ;;
  esac
  [ "$c" = deps ] || echo "cluster: built $c in $(( $(date +%s) - start ))s"
done
