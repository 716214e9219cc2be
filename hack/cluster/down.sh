#!/usr/bin/env bash
# Stop what up.sh started (only the PIDs it recorded) and remove the network devices, iptables rules, mounts,
# cgroups and state it made. Cached binaries are kept. Idempotent. KEEP_DATA=1 keeps etcd/containerd/registry data.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
need_root "cluster-down" cluster-down
C=$STATE/containerd
stop() { # name: SIGTERM the recorded PID if it is still the process we started, wait up to 15 s, then SIGKILL
  local f=$RUN/$1.pid p st; [ -f "$f" ] || return 0; read -r p st < "$f"
  if [ "$(awk '{print $22}' "/proc/$p/stat" 2>/dev/null)" = "$st" ]; then
    kill "$p" 2>/dev/null; for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"
    echo "stopped $1 ($p)"
  fi
  rm -f "$f"
}
stop kube-proxy
[ -f "$RUN/kube-proxy.yaml" ] && [ -x "$BIN/kube-proxy" ] && "$BIN/kube-proxy" --cleanup >/dev/null 2>&1
stop local-path-provisioner; stop kubelet; stop coredns
# Pods: stop and remove every sandbox through the CRI (tears down CNI, network namespaces, mounts, shims).
[ -S "$C/containerd.sock" ] && [ -f "$RUN/containerd.pid" ] && [ -x "$BIN/crirm" ] && "$BIN/crirm" "unix://$C/containerd.sock"
# Shims still serving our containerd, found by our socket path.
for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $C/containerd.sock"); do kill -9 "$p" 2>/dev/null; done
stop containerd; stop registry; stop apiserver-bridge; stop kube-scheduler; stop kube-controller-manager; stop kube-apiserver; stop etcd
# Host changes made by up.sh, the CNI plugin and kube-proxy.
while iptables -D FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP 2>/dev/null; do :; done
for ipt in iptables ip6tables; do for t in filter nat mangle; do   # KUBE-* and CNI-* chains
  $ipt -t $t -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j (KUBE|CNI)-' | sed 's/^-A/-D/' | while read -r r; do eval "$ipt -t $t $r"; done
  for ch in $($ipt -t $t -S 2>/dev/null | awk '/^-N (KUBE|CNI)-/{print $2}'); do $ipt -t $t -F "$ch"; done
  for ch in $($ipt -t $t -S 2>/dev/null | awk '/^-N (KUBE|CNI)-/{print $2}'); do $ipt -t $t -X "$ch" 2>/dev/null; done
done; done
for v in $(ip -o link show type veth 2>/dev/null | awk -F'[ @:]+' -v b="$BRIDGE" '$0 ~ "master " b {print $2}'); do ip link del "$v" 2>/dev/null; done
ip link del "$BRIDGE" 2>/dev/null
[ -f "$RUN/ip_forward.orig" ] && cat "$RUN/ip_forward.orig" > /proc/sys/net/ipv4/ip_forward
[ -f "$RUN/route_localnet.orig" ] && cat "$RUN/route_localnet.orig" > /proc/sys/net/ipv4/conf/all/route_localnet
grep -o " $STATE/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
grep -o " /run/netns/cni-[^ ]*" /proc/mounts | while read -r m; do umount -l "$m" 2>/dev/null; rm -f "$m"; done
for d in $(awk '$3 ~ /^cgroup2?$/ {print $2}' /proc/mounts); do
  [ -d "$d/devtool" ] && find "$d/devtool" -depth -type d -exec rmdir {} + 2>/dev/null
done
find /var/log/containers /var/log/pods -maxdepth 1 -lname "$STATE/*" -delete 2>/dev/null
if [ "${KEEP_DATA:-0}" != 1 ]; then
  rm -rf "$STATE/etcd-data" "$C" "$STATE/kubelet" "$STATE/cni" "$STATE/pod-logs" "$STATE/local-path" "$STATE/registry" "$RUN" "$PKI" "$KUBECONFIG_OUT"
fi
echo "cluster down."
