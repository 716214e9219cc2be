#!/usr/bin/env bash
# The main job on a fresh machine: the local cluster, devtool, and a real deploy of examples/hello
# (a database with a volume, a migration Job and a web service, in depends_on order), then a request
# to the web service through a port-forward. Uses KUBECONFIG when it is set, else the local cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/cluster/lib.sh
if [ -z "${KUBECONFIG:-}" ]; then
  hack/cluster/up.sh
  export KUBECONFIG=$KUBECONFIG_OUT
fi
make --no-print-directory build
NS=${NAMESPACE:-devtool-demo}
kubectl get namespace "$NS" >/dev/null 2>&1 || kubectl create namespace "$NS" >/dev/null
(cd examples/hello && ../../bin/devtool deploy --namespace "$NS" --wait)
kubectl -n "$NS" get pods
kubectl -n "$NS" port-forward --address 127.0.0.1 deploy/web 18080:8080 >/dev/null 2>&1 & pf=$!
trap 'kill $pf 2>/dev/null' EXIT
for _ in $(seq 50); do curl -sf http://127.0.0.1:18080/ && break; sleep 0.2; done
echo "Deployed examples/hello to namespace $NS. Remove it with: (cd examples/hello && ../../bin/devtool destroy --namespace $NS --volumes)"
