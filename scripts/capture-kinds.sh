#!/usr/bin/env bash
# Prints src/apiserver/kinds-v<VERSION>.txt: every kind a kube-apiserver
# serves, read from its discovery (/api, /api/<v>, /apis, /apis/<g>/<v>), one
# row per kind and version, groups in the apiserver's priority order and each
# group's versions preferred first.
#
#   scripts/capture-kinds.sh DEFAULT_KUBECONFIG ALL_KUBECONFIG > src/apiserver/kinds-v1.36.2.txt
#
# DEFAULT_KUBECONFIG reaches an apiserver started with its defaults;
# ALL_KUBECONFIG one of the same version started with
# --runtime-config=api/all=true --feature-gates=AllAlpha=true,AllBeta=true.
# Rows only the second serves are marked `opt-in`: a default apiserver does
# not serve them. Both must have no CustomResourceDefinition and no
# aggregated APIService.
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,14p' "$0" >&2; exit 2; }

rows() {
  local kc=$1 v gv
  raw() { kubectl --kubeconfig "$kc" get --raw "$1"; }
  select='.resources[] | select(.name | contains("/") | not) | [$gv, .kind, .name, (.namespaced | tostring)] | @tsv'
  for v in $(raw /api | jq -r '.versions[]'); do
    raw "/api/$v" | jq -r --arg gv "$v" "$select"
  done
  for gv in $(raw /apis | jq -r '.groups[].versions[].groupVersion'); do
    raw "/apis/$gv" | jq -r --arg gv "$gv" "$select"
  done
}

version=$(kubectl --kubeconfig "$1" version -o json | jq -r .serverVersion.gitVersion)
other=$(kubectl --kubeconfig "$2" version -o json | jq -r .serverVersion.gitVersion)
[ "$version" = "$other" ] || { echo "the apiservers differ: $version and $other" >&2; exit 1; }
default=$(rows "$1")
all=$(rows "$2")
cat <<HEADER
# The kinds Kubernetes $version serves: its kube-apiserver's discovery,
# captured $(date -u +%Y-%m-%d) by scripts/capture-kinds.sh from two apiservers of that
# version (built from its sources, on loopback, each with its own etcd), one
# with its defaults and one with --runtime-config=api/all=true
# --feature-gates=AllAlpha=true,AllBeta=true, neither with a CRD or an
# aggregated API. SERVED is \`default\` for what a default apiserver serves,
# \`opt-in\` for what only --runtime-config or --feature-gates turn on.
# Read by src/apiserver/builtin.rs; do not edit by hand, capture again.
HEADER
{
  printf 'APIVERSION\tKIND\tRESOURCE\tNAMESPACED\tSERVED\n'
  while IFS=$'\t' read -r gv kind resource namespaced; do
    if grep -qxF "$gv"$'\t'"$kind"$'\t'"$resource"$'\t'"$namespaced" <<<"$default"; then
      served=default
    else
      served=opt-in
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$gv" "$kind" "$resource" "$namespaced" "$served"
  done <<<"$all"
  # What only the default one serves (none, unless a version was removed).
  while IFS=$'\t' read -r gv kind resource namespaced; do
    grep -qxF "$gv"$'\t'"$kind"$'\t'"$resource"$'\t'"$namespaced" <<<"$all" ||
      printf '%s\t%s\t%s\t%s\tdefault\n' "$gv" "$kind" "$resource" "$namespaced"
  done <<<"$default"
} | column -t -s $'\t'
