#!/usr/bin/env bash
# The main job on a fresh machine: the local cluster, devtool, and a real deploy of examples/hello
# (a database with a volume, a migration Job and a web service, in depends_on order), a request to
# the web service through a port-forward, then its development container: `devtool up web` without a
# terminal, a local edit served by the app through the forward, and `devtool down web` restoring the
# original. Uses KUBECONFIG when it is set, else the local cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/cluster/lib.sh
if [ -z "${KUBECONFIG:-}" ]; then
  hack/cluster/up.sh
  export KUBECONFIG=$KUBECONFIG_OUT
fi
make --no-print-directory build
NS=${NAMESPACE:-devtool-demo}
DEVTOOL=$PWD/bin/devtool
kubectl get namespace "$NS" >/dev/null 2>&1 || kubectl create namespace "$NS" >/dev/null
(cd examples/hello && "$DEVTOOL" deploy --namespace "$NS" --wait)
kubectl -n "$NS" get pods
kubectl -n "$NS" port-forward --address 127.0.0.1 deploy/web 18081:8080 >/dev/null 2>&1 & pf=$!
up=""
work=""
cleanup() {
  kill "$pf" 2>/dev/null || true
  if [ -n "$up" ]; then kill -INT "$up" 2>/dev/null || true; wait "$up" 2>/dev/null || true; fi
  if [ -n "$work" ]; then (cd "$work" && "$DEVTOOL" down web --namespace "$NS" >/dev/null 2>&1 || true); rm -rf "$work"; fi
}
trap cleanup EXIT
for _ in $(seq 50); do curl -sf http://127.0.0.1:18081/ && break; sleep 0.2; done
kill "$pf" 2>/dev/null || true

# A copy of the example, so the demo's edit leaves the repository alone.
work=$(mktemp -d)
cp -r examples/hello/. "$work/"
echo "--- devtool up web (no terminal: one line per state)"
(cd "$work" && exec "$DEVTOOL" up web --namespace "$NS") > >(sed -u 's/^/  up: /') 2>&1 &
up=$!
for _ in $(seq 600); do curl -sf http://127.0.0.1:18080/ >/dev/null && break; sleep 0.2; done
echo "--- served by the dev container through the forward on 127.0.0.1:18080:"
curl -sf http://127.0.0.1:18080/
echo '<h1>edited on this machine</h1>' > "$work/web/index.html"
edited=""
for _ in $(seq 100); do curl -sf http://127.0.0.1:18080/ | grep -q edited && { edited=1; break; }; sleep 0.1; done
[ -n "$edited" ] || { echo "demo: the local edit did not reach the dev container within 10 s" >&2; exit 1; }
echo "--- after a local edit of web/index.html:"
curl -sf http://127.0.0.1:18080/
kill -INT "$up" 2>/dev/null || true; wait "$up" 2>/dev/null || true; up=""
echo "--- devtool down web"
(cd "$work" && "$DEVTOOL" down web --namespace "$NS")
rm -rf "$work"; work=""
echo "Deployed examples/hello to namespace $NS. Remove it with: (cd examples/hello && ../../bin/devtool destroy --namespace $NS --volumes)"
