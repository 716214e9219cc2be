#!/usr/bin/env bash
# make platform-up / platform-down: the platform server in the local cluster (or the one KUBECONFIG
# names), installed by devtool itself from deploy/platform/devtool.yml. Idempotent both ways.
#   up    builds bin/devtool and bin/devtool-platform, deploys, waits until the platform answers, and
#         leaves $PLATFORM_OUT_DIR (default $STATE)/platform-url, platform-ca.crt, platform-admin-token
#         and platform-webhook-secret (0600)
#   down  destroys that environment, the namespaces the platform made, and the three files
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/cluster/lib.sh
export KUBECONFIG=${KUBECONFIG:-$KUBECONFIG_OUT}
[ -d "$BIN" ] && export PATH=$BIN:$PATH   # the cluster's kubectl
NS=${PLATFORM_NAMESPACE:-devtool-system}
# PLATFORM_NAMESPACE and PLATFORM_OUT_DIR install a second instance beside the lead's (its files in
# its own folder; tests find it through DEVTOOL_TEST_PLATFORM_DIR=<that folder>); PLATFORM_ANALYTICS=true
# lets it accept analytics events from the start.
OUT=${PLATFORM_OUT_DIR:-$STATE}
files=("$OUT/platform-url" "$OUT/platform-ca.crt" "$OUT/platform-admin-token" "$OUT/platform-webhook-secret")
# helm for the pipeline runner's image, when hack/helm/build.sh has built it
HELM=$(hack/helm/build.sh --print-bin)/helm
[ -x "$HELM" ] && export PLATFORM_RUNNER_HELM=${PLATFORM_RUNNER_HELM:-$HELM}
case "${1:-}" in
up)
  make --no-print-directory build platform-bin
  kubectl get namespace "$NS" >/dev/null 2>&1 || kubectl create namespace "$NS" >/dev/null
  api=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  mkdir -p "$OUT"
  PLATFORM_API_SERVER=${PLATFORM_API_SERVER:-$api} PLATFORM_OUT_DIR=$OUT \
    bin/devtool deploy --file deploy/platform/devtool.yml --namespace "$NS"
  echo "platform: $(cat "$OUT/platform-url")  (CA $OUT/platform-ca.crt, admin token $OUT/platform-admin-token)"
  ;;
down)
  make --no-print-directory build
  if kubectl get namespace "$NS" >/dev/null 2>&1; then
    if [ "$NS" = devtool-system ]; then
      bin/devtool destroy --file deploy/platform/devtool.yml --namespace "$NS"
    else
      # A second instance shares the CRDs and the membership ClusterRoles with the first: destroying
      # what its deploy labelled could reach them (an install older than their keep annotation). Only its
      # own go, by name.
      kubectl delete clusterrolebinding,clusterrole "devtool-platform-$NS" "devtool-ingress-$NS" --ignore-not-found >/dev/null
      kubectl delete clusterrolebinding "devtool-registry-$NS" --ignore-not-found >/dev/null   # the registry proxy's auth-delegator
      kubectl delete ingressclass "devtool-$NS" --ignore-not-found >/dev/null
    fi
    # Only the namespaces this instance made (annotated with its namespace; older ones without the
    # annotation: those its users are members of). Another instance's users keep theirs.
    members=" $(kubectl get rolebindings -A -l devtool.dev/member \
      -o jsonpath="{range .items[?(@.subjects[0].namespace==\"$NS\")]}{.metadata.namespace}{\" \"}{end}") "
    for n in $(kubectl get namespace -l devtool.dev/managed=true -o name); do
      n=${n#namespace/}
      owner=$(kubectl get namespace "$n" -o jsonpath='{.metadata.annotations.devtool\.dev/platform}' 2>/dev/null || true)
      if [ "$owner" = "$NS" ] || { [ -z "$owner" ] && [[ "$members" == *" $n "* ]]; }; then
        kubectl delete namespace "$n" --ignore-not-found --wait=false >/dev/null
      fi
    done
    kubectl delete namespace "$NS" --ignore-not-found >/dev/null
  fi
  rm -f "${files[@]}"
  ;;
*) echo "usage: hack/platform.sh up|down" >&2; exit 2 ;;
esac
