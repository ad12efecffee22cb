#!/usr/bin/env bash
# Times `nodescope dry-run` over 10,000 objects against the whole bundled
# policy set, in release. The objects cycle through five shapes so every
# policy of the bundle and the per-node mutation run:
#   1. a DaemonSet pod for node-a-1 (node-exporter: mutated from examples/store)
#   2. a balloon pod (nodescope-balloon-pods, feature gate)
#   3. a node-scoped VPA (nodescope-vpa-scope, feature gate)
#   4. a DaemonSet (pod-template rules)
#   5. a PriorityClass node-balloon (nodescope-balloon-priorityclass)
# Usage: bench/dry-run-10k.sh [COUNT]   (needs hyperfine, else /usr/bin/time)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-10000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
input="$work/objects.yaml"

for ((i = 0; i < count; i++)); do
  case $((i % 5)) in
  0) printf -- '---
apiVersion: v1
kind: Pod
metadata:
  generateName: node-exporter-
  namespace: monitoring
  labels: {app.kubernetes.io/name: node-exporter, n: "%d"}
  ownerReferences:
  - {apiVersion: apps/v1, kind: DaemonSet, name: node-exporter, uid: u, controller: true}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchFields: [{key: metadata.name, operator: In, values: [node-a-1]}]
  containers:
  - name: node-exporter
    image: quay.io/prometheus/node-exporter:v1.8.2
    resources: {requests: {cpu: 102m, memory: 180Mi}, limits: {cpu: 250m, memory: 180Mi}}
  - name: kube-rbac-proxy
    image: quay.io/brancz/kube-rbac-proxy:v0.18.1
    resources: {limits: {cpu: 20m, memory: 40Mi}}
' "$i" ;;
  1) printf -- '---
apiVersion: v1
kind: Pod
metadata:
  name: balloon-%d
  namespace: kube-system
  labels: {node.kubernetes.io/balloon: "true"}
  ownerReferences:
  - {apiVersion: apps/v1, kind: DaemonSet, name: node-balloon, uid: u, controller: true}
spec:
  priorityClassName: node-balloon
  containers:
  - {name: pause, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 500m, memory: 512Mi}}}
' "$i" ;;
  2) printf -- '---
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata: {name: vpa-%d, namespace: ops}
spec:
  scope: node
  targetRef: {apiVersion: apps/v1, kind: DaemonSet, name: agent-%d}
' "$i" "$i" ;;
  3) printf -- '---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent-%d, namespace: ops}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: agent:1, resources: {requests: {cpu: 10m, memory: 16Mi}}}
' "$i" ;;
  4) printf -- '---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: node-balloon}
value: 1000000000
preemptionPolicy: Never
' ;;
  esac
done >"$input"

cargo build --release --locked --quiet
bin=target/release/nodescope
cmd="$bin dry-run -f $input --params examples/store --recommendations examples/store -o json"
# Sanity: every object evaluated, none denied.
$cmd >"$work/report.json"
grep -q "\"objects\": $count," "$work/report.json"
echo "$(nproc) cores; $(wc -c <"$input") bytes of YAML, $count objects"
if command -v hyperfine >/dev/null; then
  hyperfine --warmup 1 --runs 10 --output=null "$cmd"
else
  /usr/bin/time -f "%e s elapsed, %M KB max RSS" $cmd >/dev/null
fi
