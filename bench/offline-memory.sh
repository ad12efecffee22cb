#!/usr/bin/env bash
# Peak memory of the offline commands on large inputs (issue 30):
#  - `update --plan` and `balloon status` on a store of PODS pods (100,000
#    by default) on PODS/10 nodes, written as `kubectl get pods -A -o json`
#    writes them (one JSON `List`, pods with their status), beside a
#    NodeList, a DaemonSetList and a scoped VPA per DaemonSet;
#  - `dry-run -f` on CONFIGMAPS ConfigMaps (70,000 by default, about 20 MB
#    of YAML) that no binding takes as a param.
# Prints the inputs' sizes and, per command, the wall time, the exit code
# and the max RSS that `/usr/bin/time -v` reports. Targets: under 512 MiB
# for the store, under 256 MiB for the ConfigMaps.
# With STORE_FORMAT=yaml the pods are one YAML `List` document instead, as
# `kubectl get pods -A -o yaml` writes them (each item in flow style).
# Usage: [NODESCOPE=bin] [BEFORE=bin] [STORE_FORMAT=json|yaml] bench/offline-memory.sh [PODS] [CONFIGMAPS]
set -euo pipefail
cd "$(dirname "$0")/.."
pods=${1:-100000}
configmaps=${2:-70000}
# KEEP=DIR writes the inputs there and leaves them, to run commands by hand.
if [[ -n ${KEEP:-} ]]; then
    work=$KEEP
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/store"

python3 - "$work" "$pods" "$configmaps" "${STORE_FORMAT:-json}" <<'PY'
import json, sys
work, pods, configmaps, store_format = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
nodes = max(1, pods // 10)
daemonsets = 10
tolerations = [{"effect": e, "key": k, "operator": "Exists"} for k, e in [
    ("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")]]
def pod(i):
    ds, node = f"agent-{i % daemonsets}", f"node-{i // 10:06d}"
    name = f"{ds}-{i:07d}"
    res = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "200m", "memory": "256Mi"}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "monitoring", "generateName": f"{ds}-",
            "uid": f"00000000-0000-0000-0000-{i:012d}", "resourceVersion": str(1000 + i),
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {"app": ds, "controller-revision-hash": "5d8f7c9b4", "pod-template-generation": "3"},
            "annotations": {"kubectl.kubernetes.io/default-container": "agent"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds,
                "uid": f"11111111-0000-0000-0000-{i % daemonsets:012d}", "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"nodeName": node, "serviceAccountName": "agent", "priorityClassName": "system-node-critical",
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
            "containers": [{"name": "agent", "image": "registry.example/agent:1.2.3", "imagePullPolicy": "IfNotPresent",
                "args": ["--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--web.listen-address=:9100"],
                "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
                "ports": [{"containerPort": 9100, "name": "metrics", "protocol": "TCP"}],
                "resources": res,
                "volumeMounts": [{"mountPath": "/host/proc", "name": "proc", "readOnly": True},
                                 {"mountPath": "/host/sys", "name": "sys", "readOnly": True},
                                 {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "kube-api-access", "readOnly": True}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
            "tolerations": tolerations,
            "volumes": [{"name": "proc", "hostPath": {"path": "/proc", "type": ""}},
                        {"name": "sys", "hostPath": {"path": "/sys", "type": ""}},
                        {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]},
        "status": {"phase": "Running", "qosClass": "Burstable", "hostIP": "10.0.0.1", "podIP": "10.1.0.1",
            "startTime": "2026-11-01T00:00:10Z",
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2026-11-01T00:00:12Z"}
                           for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [{"name": "agent", "ready": True, "restartCount": 0, "started": True,
                "image": "registry.example/agent:1.2.3", "imageID": "registry.example/agent@sha256:" + "0" * 64,
                "containerID": "containerd://" + f"{i:064d}", "resources": res,
                "state": {"running": {"startedAt": "2026-11-01T00:00:11Z"}}}]}}
if store_format == "yaml":
    with open(f"{work}/store/pods.yaml", "w") as out:
        out.write("apiVersion: v1\nitems:\n")
        for i in range(pods):
            out.write("- " + json.dumps(pod(i)) + "\n")
        out.write('kind: List\nmetadata: {resourceVersion: ""}\n')
else:
  with open(f"{work}/store/pods.json", "w") as out:
    # kubectl's key order: apiVersion, items, kind, metadata.
    out.write('{"apiVersion": "v1", "items": [\n')
    for i in range(pods):
        out.write((",\n" if i else "") + json.dumps(pod(i)))
    out.write('\n], "kind": "List", "metadata": {"resourceVersion": ""}}\n')
with open(f"{work}/store/nodes.json", "w") as out:
    items = [{"metadata": {"name": f"node-{n:06d}", "labels": {"topology.kubernetes.io/zone": f"z{n % 3}"},
              "annotations": {"nodescope.dev/usable-fraction": "0.9"}},
              "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}} for n in range(nodes)]
    json.dump({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items}, out)
with open(f"{work}/store/workloads.yaml", "w") as out:
    for d in range(daemonsets):
        out.write(f"""---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent-{d}, namespace: monitoring}}
spec:
  selector: {{matchLabels: {{app: agent-{d}}}}}
  template:
    metadata: {{labels: {{app: agent-{d}}}}}
    spec:
      containers:
      - name: agent
        image: registry.example/agent:1.2.3
        resources: {{requests: {{cpu: 100m, memory: 128Mi}}, limits: {{cpu: 200m, memory: 256Mi}}}}
status: {{desiredNumberScheduled: {pods // daemonsets}}}
---
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata: {{name: agent-{d}, namespace: monitoring, creationTimestamp: "2026-11-01T00:00:00Z"}}
spec:
  scope: topology.kubernetes.io/zone
  targetRef: {{apiVersion: apps/v1, kind: DaemonSet, name: agent-{d}}}
  updatePolicy: {{updateMode: InPlaceOrRecreate}}
status:
  recommendationGroups:
""")
        for z in range(3):
            out.write(f"""  - scopeValue: z{z}
    containerRecommendations:
    - containerName: agent
      target: {{cpu: {150 + 50 * z}m, memory: {160 + 32 * z}Mi}}
""")
with open(f"{work}/configmaps.yaml", "w") as out:
    for i in range(configmaps):
        out.write(f"---\n{{apiVersion: v1, kind: ConfigMap, metadata: {{name: settings-{i}, namespace: team-{i % 50}, labels: {{app: web, tier: frontend}}}}, data: {{LOG_LEVEL: info, FEATURE_X: enabled, ENDPOINT: 'https://api.example.com/v1/items/{i}', TIMEOUT: 30s, REGION: eu-west-1, RETRIES: '3', OWNER: platform-team}}}}\n")
PY

run() { # label, binary, args...
    local label=$1 bin=$2; shift 2
    local code=0
    /usr/bin/time -v "$bin" "$@" >/dev/null 2>"$work/time" || code=$?
    local wall rss
    wall=$(grep 'Elapsed (wall clock)' "$work/time" | awk '{print $NF}')
    rss=$(grep 'Maximum resident set size' "$work/time" | awk '{print $NF}')
    echo "$label: exit $code, $wall wall, $((rss / 1024)) MiB max RSS"
}

[[ -n ${KEEP:-} && -n ${NO_RUN:-} ]] && exit 0
echo "$(nproc) cores; store $(du -sb "$work/store" | cut -f1) bytes ($pods pods, $((pods / 10)) nodes); $(wc -c <"$work/configmaps.yaml") bytes of ConfigMaps ($configmaps)"
for bin in ${BEFORE:+"$BEFORE"} "${NODESCOPE:-target/release/nodescope}"; do
    echo "== $bin"
    run "update --plan" "$bin" update --plan --store "file:$work/store"
    run "balloon status" "$bin" balloon status --store "file:$work/store"
    run "dry-run -f configmaps" "$bin" dry-run -f "$work/configmaps.yaml"
done
