# Shared settings for the local cluster scripts. Sourced, never run.
# Two places, both outside the repo:
#   CACHE  built binaries and images, keyed by version, kept across cluster-down (a warm machine never rebuilds)
#   STATE  everything a running cluster writes (PKI, etcd data, containerd root, logs, PID files); wiped by down
K8S_VERSION=${K8S_VERSION:-v1.32.5}     # newest 1.32 patch whose k8s.io staging modules the proxy serves whole
ETCD_VERSION=${ETCD_VERSION:-v3.5.21}
LPP_VERSION=${LPP_VERSION:-v0.0.30}     # rancher/local-path-provisioner
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
CACHE=${DEVTOOL_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/devtool-cluster}
BIN=$CACHE/bin/k8s-$K8S_VERSION
STATE=${DEVTOOL_CLUSTER_STATE:-/tmp/devtool-cluster}
RUN=$STATE/run PKI=$STATE/pki LOG=$STATE/logs
KUBECONFIG_OUT=$STATE/kubeconfig
# Ports: all on 127.0.0.1, away from the defaults so a developer's own cluster is never disturbed.
ETCD_PORT=22379 API_PORT=26443 KUBELET_PORT=21250 REGISTRY_PORT=25000
POD_CIDR=10.244.91.0/24 SVC_CIDR=10.97.0.0/16 BRIDGE=devtool0 BRIDGE_IP=10.244.91.1

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "hack/cluster: $1 needs root (it runs containerd and the kubelet, and creates a bridge and iptables rules); run it as root, e.g. sudo make ${2:-cluster-up}" >&2
    exit 1
  fi
}
