#!/usr/bin/env bash
# Start the local single-node cluster: etcd, kube-apiserver, controller-manager, scheduler, containerd+kubelet,
# kube-proxy, CoreDNS, a local-path PVC provisioner and a loopback image registry. Idempotent: a running cluster
# is left as it is. Writes $STATE/kubeconfig and returns once a pod can run. Stop with down.sh.
# Everything listens on 127.0.0.1 (plus the API on the project's own pod bridge, for in-cluster clients).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
need_root "cluster-up"
"$HERE/build.sh"   # warm: finds everything cached and returns at once
export PATH=$BIN:$PATH
mkdir -p "$RUN" "$PKI" "$LOG"
T0=$(date +%s.%N)
say() { printf '[cluster-up %5.1fs] %s\n' "$(awk "BEGIN{print $(date +%s.%N) - $T0}")" "$*"; }
running() { # name: is the process we recorded still alive (same PID and start time)?
  local f=$RUN/$1.pid p st; [ -f "$f" ] || return 1; read -r p st < "$f"
  [ "$(awk '{print $22}' "/proc/$p/stat" 2>/dev/null)" = "$st" ]
}
start() { # name cmd...: run in the background unless already running; record "PID STARTTIME"
  local n=$1; shift
  running "$n" && return 0
  setsid "$@" > "$LOG/$n.log" 2>&1 < /dev/null & local pid=$!
  echo "$pid $(awk '{print $22}' "/proc/$pid/stat")" > "$RUN/$n.pid"
}
wait_for() { # what timeout-seconds cmd...: retry every 0.2 s
  local what=$1 t=$2 i; shift 2
  for ((i = 0; i < t * 5; i++)); do "$@" >/dev/null 2>&1 && { say "$what"; return 0; }; sleep 0.2; done
  echo "cluster-up: timed out waiting for $what; logs are in $LOG" >&2; exit 1
}
k() { kubectl --kubeconfig "$KUBECONFIG_OUT" "$@"; }
put() { # file: write stdin to file only when it differs; running components (kube-proxy) exit when their config changes
  cat > "$1.new"
  if cmp -s "$1.new" "$1"; then rm -f "$1.new"; else mv "$1.new" "$1"; fi
}
NODE_NAME=$(hostname | tr '[:upper:]' '[:lower:]')
API=https://127.0.0.1:$API_PORT
C=$STATE/containerd

# --- PKI: one CA, one certificate per component (CN/O are the identities RBAC and the Node authorizer expect)
cert() { # name CN O [SAN]
  [ -f "$PKI/$1.crt" ] && return
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/$1.key" \
    -subj "/CN=$2${3:+/O=$3}" -out "$PKI/$1.csr" 2>/dev/null
  printf 'keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n%s' "${4:+subjectAltName=$4}" > "$PKI/$1.ext"
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
    -extfile "$PKI/$1.ext" -out "$PKI/$1.crt" 2>/dev/null
}
if [ ! -f "$PKI/ca.crt" ]; then
  chmod 700 "$PKI"
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/ca.key" \
    -out "$PKI/ca.crt" -subj /CN=devtool-local-ca -days 3650 2>/dev/null
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null; openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
fi
SVC_IP=${SVC_CIDR%.0/16}.1
cert apiserver kube-apiserver "" "IP:127.0.0.1,IP:$BRIDGE_IP,IP:$SVC_IP,DNS:localhost,DNS:$NODE_NAME,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert kubelet-serving "$NODE_NAME" "" "IP:127.0.0.1,DNS:localhost,DNS:$NODE_NAME"
cert admin devtool-admin system:masters
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
cert controller-manager system:kube-controller-manager
cert scheduler system:kube-scheduler
cert kubelet "system:node:$NODE_NAME" system:nodes
cert kube-proxy system:kube-proxy
kubeconfig() { # file user
  local f=$1
  [ -f "$f" ] && return
  kubectl config --kubeconfig "$f.tmp" set-cluster devtool-local --server "$API" --certificate-authority "$PKI/ca.crt" --embed-certs >/dev/null
  kubectl config --kubeconfig "$f.tmp" set-credentials "$2" --client-certificate "$PKI/$2.crt" --client-key "$PKI/$2.key" --embed-certs >/dev/null
  kubectl config --kubeconfig "$f.tmp" set-context devtool-local --cluster devtool-local --user "$2" --namespace default >/dev/null
  kubectl config --kubeconfig "$f.tmp" use-context devtool-local >/dev/null
  chmod 600 "$f.tmp"; mv "$f.tmp" "$f"
}
for u in admin controller-manager scheduler kubelet kube-proxy; do kubeconfig "$RUN/$u.kubeconfig" $u; done
cp "$RUN/admin.kubeconfig" "$KUBECONFIG_OUT"; chmod 600 "$KUBECONFIG_OUT"

# --- etcd (plain HTTP on loopback only)
start etcd "$BIN/etcd" --name devtool --data-dir "$STATE/etcd-data" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls http://127.0.0.1:22380 --initial-advertise-peer-urls http://127.0.0.1:22380 \
  --initial-cluster devtool=http://127.0.0.1:22380 --listen-metrics-urls http://127.0.0.1:22381
wait_for "etcd healthy" 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

# --- pod network: the bridge exists before the API server so it can be advertised on it
ip link show "$BRIDGE" >/dev/null 2>&1 || { ip link add "$BRIDGE" type bridge; ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"; }
ip link set "$BRIDGE" up
# The bridge plugin turns on ip_forward: remember the old value, and keep pods from routing off the machine.
[ -f "$RUN/ip_forward.orig" ] || cat /proc/sys/net/ipv4/ip_forward > "$RUN/ip_forward.orig"
iptables -C FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP 2>/dev/null || iptables -I FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP
# In-cluster clients reach the API as $SVC_IP -> (kube-proxy) -> $BRIDGE_IP:$API_PORT -> socat -> 127.0.0.1.
start apiserver-bridge socat "TCP-LISTEN:$API_PORT,bind=$BRIDGE_IP,fork,reuseaddr" "TCP:127.0.0.1:$API_PORT"

# --- control plane
start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address "$BRIDGE_IP" --secure-port "$API_PORT" \
  --service-cluster-ip-range "$SVC_CIDR" --allow-privileged \
  --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types Hostname --kubelet-certificate-authority "$PKI/ca.crt" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction
wait_for "kube-apiserver ready" 120 k get --raw /readyz

start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$RUN/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$RUN/controller-manager.kubeconfig" --authorization-kubeconfig "$RUN/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 21257 --leader-elect=false --use-service-account-credentials \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" --service-cluster-ip-range "$SVC_CIDR"
start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$RUN/scheduler.kubeconfig" \
  --authentication-kubeconfig "$RUN/scheduler.kubeconfig" --authorization-kubeconfig "$RUN/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 21259 --leader-elect=false

# --- image registry on loopback (Debian's docker-registry); containerd pulls from it over plain HTTP
mkdir -p "$STATE/registry"
put "$RUN/registry.yml" <<REGISTRY_CONFIG
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage:
  filesystem: {rootdirectory: $STATE/registry}
  delete: {enabled: true}
  maintenance: {uploadpurging: {enabled: false}}
http: {addr: "127.0.0.1:$REGISTRY_PORT"}
health: {storagedriver: {enabled: false}}
REGISTRY_CONFIG
start registry docker-registry serve "$RUN/registry.yml"

# --- node: containerd + kubelet
mkdir -p "$C/certs.d/127.0.0.1:$REGISTRY_PORT" "$STATE/cni/net.d" "$STATE/kubelet" "$STATE/pod-logs"
put "$C/certs.d/127.0.0.1:$REGISTRY_PORT/hosts.toml" <<HOSTS_TOML
server = "http://127.0.0.1:$REGISTRY_PORT"
[host."http://127.0.0.1:$REGISTRY_PORT"]
  capabilities = ["pull", "resolve"]
HOSTS_TOML
put "$C/config.toml" <<CONTAINERD_CONFIG
version = 2
root = "$C/root"
state = "$C/state"
[grpc]
  address = "$C/containerd.sock"
[ttrpc]
  address = "$C/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$C/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  restrict_oom_score_adj = true   # this VM drops CAP_SYS_RESOURCE: a negative oom_score_adj fails every pod
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$C/certs.d"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      Root = "$C/runc"
CONTAINERD_CONFIG
put "$STATE/cni/net.d/10-devtool.conflist" <<CNI_CONFIG
{"cniVersion": "1.0.0", "name": "devtool", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$BRIDGE_IP"}]],
            "routes": [{"dst": "$SVC_CIDR"}], "dataDir": "$STATE/cni/ipam"}}]}
CNI_CONFIG
start containerd containerd --config "$C/config.toml"
wait_for "containerd up" 30 ctr --address "$C/containerd.sock" version
for i in pause busybox; do ctr --address "$C/containerd.sock" -n k8s.io images import "$BIN/$i.tar" >/dev/null; done
say "images imported (pause, busybox:local)"

# Cluster DNS: CoreDNS on the bridge address, answering cluster.local only (nothing is forwarded off the machine).
put "$RUN/Corefile" <<COREFILE
cluster.local in-addr.arpa {
  bind $BRIDGE_IP
  kubernetes cluster.local in-addr.arpa {
    kubeconfig $RUN/admin.kubeconfig devtool-local
    pods insecure
  }
  errors
}
COREFILE
start coredns "$BIN/coredns" -conf "$RUN/Corefile"

# cgroup v1 with the cgroupfs driver: the kubelet puts pods under /devtool in every hierarchy.
for d in $(awk '$3 == "cgroup" {print $2}' /proc/mounts); do mkdir -p "$d/devtool"; done
put "$RUN/kubelet.yaml" <<KUBELET_CONFIG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
healthzBindAddress: 127.0.0.1
healthzPort: 21248
readOnlyPort: 0
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $PKI/ca.crt}}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$C/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /devtool
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
podLogsDir: $STATE/pod-logs
podCIDR: $POD_CIDR
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
clusterDNS: [$BRIDGE_IP]
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
KUBELET_CONFIG
start kubelet "$BIN/kubelet" --config "$RUN/kubelet.yaml" --kubeconfig "$RUN/kubelet.kubeconfig" \
  --root-dir "$STATE/kubelet" --hostname-override "$NODE_NAME"

# --- kube-proxy (iptables mode) for ClusterIPs
[ -f "$RUN/route_localnet.orig" ] || cat /proc/sys/net/ipv4/conf/all/route_localnet > "$RUN/route_localnet.orig"
put "$RUN/kube-proxy.yaml" <<KUBE_PROXY_CONFIG
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $RUN/kube-proxy.kubeconfig}
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:21256
metricsBindAddress: 127.0.0.1:21249
nodePortAddresses: [127.0.0.1/32]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
KUBE_PROXY_CONFIG
start kube-proxy "$BIN/kube-proxy" --config "$RUN/kube-proxy.yaml"

# --- storage: default StorageClass served by local-path-provisioner on the host; its helper pods use busybox
mkdir -p "$STATE/local-path"
k apply -f - >/dev/null <<STORAGE
apiVersion: v1
kind: Namespace
metadata: {name: local-path-storage}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: local-path-provisioner-service-account, namespace: local-path-storage}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
---
apiVersion: v1
kind: ConfigMap
metadata: {name: local-path-config, namespace: local-path-storage}
data:
  config.json: '{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["$STATE/local-path"]}]}'
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "\$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "\$VOL_DIR"
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata: {name: helper-pod}
    spec:
      containers: [{name: helper-pod, image: docker.io/library/busybox:local, imagePullPolicy: Never}]
STORAGE
start local-path-provisioner "$BIN/local-path-provisioner" start --kubeconfig "$RUN/admin.kubeconfig" \
  --namespace local-path-storage --helper-image docker.io/library/busybox:local

wait_for "registry on 127.0.0.1:$REGISTRY_PORT" 30 curl -sf "http://127.0.0.1:$REGISTRY_PORT/v2/"
wait_for "node $NODE_NAME Ready" 120 bash -c "kubectl --kubeconfig '$KUBECONFIG_OUT' get node '$NODE_NAME' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
wait_for "kube-proxy healthy" 60 curl -sf http://127.0.0.1:21256/healthz
# The 'default' ServiceAccount appears once the controller-manager runs; until then no pod can be created.
wait_for "default service account" 60 k -n default get serviceaccount default
say "cluster up: export KUBECONFIG=$KUBECONFIG_OUT   (registry 127.0.0.1:$REGISTRY_PORT)"
