#!/usr/bin/env bash
# Peak memory of an offline replay, `nodescope recommend --store file:DIR
# --metrics file:DIR --once`, against the number of recorded files: a
# node-scoped DaemonSet VPA over PODS pods of 4 containers each on as many
# nodes, and FILES PodMetricsList files of one minute each (about 2 MB per
# file at 5,000 pods). Prints, per file count, the wall time and the max
# RSS that `/usr/bin/time -v` reports. Target (issue 25): a peak that does
# not grow with the number of files.
# Usage: bench/replay-memory.sh [PODS] [FILES...]   (default: 5000 1 10 60)
set -euo pipefail
cd "$(dirname "$0")/.."
pods=${1:-5000}
shift || true
counts=("${@:-1 10 60}")
read -r -a counts <<<"${counts[*]}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/store"
printf -- '---\n{apiVersion: autoscaling.k8s.io/v1, kind: VerticalPodAutoscaler, metadata: {name: agent, namespace: ops, generation: 1}, spec: {scope: node, targetRef: {apiVersion: apps/v1, kind: DaemonSet, name: agent}, updatePolicy: {updateMode: Initial}}}\n' >"$work/store/vpa.yaml"
# A store file holds at most 1,024 documents: 400 pods and their nodes each.
for ((p = 0; p < pods; p++)); do
  {
    printf -- '---\n{apiVersion: v1, kind: Node, metadata: {name: node-%d}}\n' "$p"
    printf -- '---\n{apiVersion: v1, kind: Pod, metadata: {name: agent-%d, namespace: ops, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: u, controller: true}]}, spec: {nodeName: node-%d, containers: [{name: c0, image: a}, {name: c1, image: a}, {name: c2, image: a}, {name: c3, image: a}]}}\n' "$p" "$p"
  } >>"$work/store/pods-$((p / 400)).yaml"
done

# One PodMetricsList per minute.
minute_file() {
  local minute=$1 out=$2 at
  at=$(date -u -d "2026-11-25T00:00:00Z + $minute minutes" +%Y-%m-%dT%H:%M:%SZ)
  {
    printf '{"apiVersion":"metrics.k8s.io/v1beta1","kind":"PodMetricsList","items":['
    for ((p = 0; p < pods; p++)); do
      ((p > 0)) && printf ','
      printf '{"metadata":{"name":"agent-%d","namespace":"ops"},"timestamp":"%s","window":"1m0s","containers":[' "$p" "$at"
      printf '{"name":"c0","usage":{"cpu":"%dm","memory":"%dMi"}},' $((10 + p % 50)) $((100 + p % 90))
      printf '{"name":"c1","usage":{"cpu":"%dm","memory":"%dMi"}},' $((20 + minute % 7)) 64
      printf '{"name":"c2","usage":{"cpu":"5m","memory":"32Mi"}},'
      printf '{"name":"c3","usage":{"cpu":"1m","memory":"16Mi"}}]}'
    done
    printf ']}\n'
  } >"$out"
}

bin=${NODESCOPE:-target/release/nodescope}
echo "$(nproc) cores; $pods pods x 4 containers; $bin"
max=0
for n in "${counts[@]}"; do ((n > max)) && max=$n; done
mkdir -p "$work/all"
for ((m = 0; m < max; m++)); do minute_file "$m" "$work/all/$(printf '%05d' "$m").json"; done
echo "one file: $(wc -c <"$work/all/00000.json") bytes"
for n in "${counts[@]}"; do
  rm -rf "$work/metrics" && mkdir -p "$work/metrics"
  for ((m = 0; m < n; m++)); do ln -s "$work/all/$(printf '%05d' "$m").json" "$work/metrics/"; done
  /usr/bin/time -v "$bin" recommend --store "file:$work/store" --metrics "file:$work/metrics" \
    --once -o json >"$work/out.json" 2>"$work/time" || { cat "$work/time" >&2; exit 1; }
  wall=$(grep 'Elapsed (wall clock)' "$work/time" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$work/time" | awk '{print $NF}')
  echo "$n files: $wall wall, $((rss / 1024)) MiB max RSS"
done
