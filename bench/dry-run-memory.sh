#!/usr/bin/env bash
# Peak memory of `nodescope dry-run` on one large file: COUNT objects (70,000
# by default, about 18 MB of YAML) cycling through the five shapes of
# bench/dry-run-10k.sh, written compactly (flow style), against the whole
# bundle with examples/store as params and recommendations. Prints the
# input's size and, per output format, the wall time and max RSS that
# `/usr/bin/time -v` reports. Target (issue 25): under 256 MiB.
# Usage: bench/dry-run-memory.sh [COUNT]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-70000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
input="$work/objects.yaml"

for ((i = 0; i < count; i++)); do
  case $((i % 5)) in
  0) printf -- '---\n{apiVersion: v1, kind: Pod, metadata: {generateName: node-exporter-, namespace: monitoring, labels: {app.kubernetes.io/name: node-exporter, n: "%d"}, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: node-exporter, uid: u, controller: true}]}, spec: {nodeName: node-a-1, containers: [{name: node-exporter, image: "node-exporter:1", resources: {requests: {cpu: 102m, memory: 180Mi}}}]}}\n' "$i" ;;
  1) printf -- '---\n{apiVersion: v1, kind: Pod, metadata: {name: balloon-%d, namespace: kube-system, labels: {node.kubernetes.io/balloon: "true"}}, spec: {priorityClassName: node-balloon, containers: [{name: pause, image: "pause:3.10", resources: {requests: {cpu: 500m, memory: 512Mi}}}]}}\n' "$i" ;;
  2) printf -- '---\n{apiVersion: autoscaling.k8s.io/v1, kind: VerticalPodAutoscaler, metadata: {name: vpa-%d, namespace: ops}, spec: {scope: node, targetRef: {apiVersion: apps/v1, kind: DaemonSet, name: agent-%d}}}\n' "$i" "$i" ;;
  3) printf -- '---\n{apiVersion: apps/v1, kind: DaemonSet, metadata: {name: agent-%d, namespace: ops}, spec: {selector: {matchLabels: {app: agent}}, template: {metadata: {labels: {app: agent}}, spec: {containers: [{name: agent, image: "agent:1"}]}}}}\n' "$i" ;;
  4) printf -- '---\n{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: node-balloon}, value: 1000000000, preemptionPolicy: Never}\n' ;;
  esac
done >"$input"

bin=${NODESCOPE:-target/release/nodescope}
echo "$(nproc) cores; $(wc -c <"$input") bytes of YAML, $count objects; $bin"
for format in table json; do
  /usr/bin/time -v "$bin" dry-run -f "$input" --params examples/store \
    --recommendations examples/store -o "$format" >"$work/report.$format" 2>"$work/time.$format" || true
  summary=$(grep -E '^[0-9]+ objects:' "$work/report.table" 2>/dev/null || grep -c '"object":' "$work/report.$format")
  wall=$(grep 'Elapsed (wall clock)' "$work/time.$format" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$work/time.$format" | awk '{print $NF}')
  echo "-o $format: $wall wall, $((rss / 1024)) MiB max RSS ($summary)"
done
