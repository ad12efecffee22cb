//! `nodescope update` against the control plane. envtest has no kubelet,
//! so the step plays its part: it binds pods to Nodes that have
//! `status.allocatable` (the apiserver refuses a resize that does not fit
//! them), writes their status (Running, Ready, startTime and the actuated
//! `containerStatuses[].resources`), copies a resized spec into that status
//! as the kubelet would, and writes a `PodResizePending` condition. It also
//! plays the webhook's status Lease, fresh or stale.
//!
//! Shown: InPlaceOrRecreate pods are resized in place to exactly their
//! zone's group, never more than the tolerance at once; an Infeasible
//! resize leads to an eviction, which a PodDisruptionBudget blocks (and the
//! block is reported), and which a stale webhook Lease forbids; InPlace
//! never evicts; Initial and Off never touch a pod; of two replicas only
//! the leader acts.

use crate::support::cluster::{apply, apply_status};
use crate::support::{eventually, ControlPlane, Process};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use kube::Client;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

const NS: &str = "e2e-update";
const LIMIT: Duration = Duration::from_secs(30);
/// (node, zone)
const NODES: [(&str, &str); 4] = [
    ("e2e-upd-n1", "za"),
    ("e2e-upd-n2", "za"),
    ("e2e-upd-n3", "zb"),
    ("e2e-upd-n4", "zb"),
];

fn ago(seconds: i64) -> String {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    k8s_openapi::jiff::Timestamp::from_second(now - seconds)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

pub(crate) fn daemonset(name: &str, desired: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "agent", "image": "registry.example/agent:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"cpu": "200m", "memory": "200Mi"}}}]}}},
        "status": {"desiredNumberScheduled": desired, "currentNumberScheduled": desired, "numberMisscheduled": 0, "numberReady": desired}})
}

fn vpa(name: &str, mode: &str) -> Value {
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name},
                 "scope": "topology.kubernetes.io/zone", "updatePolicy": {"updateMode": mode}},
        "status": {"recommendation": {"containerRecommendations": [{"containerName": "agent", "target": {"cpu": "200m", "memory": "200Mi"}}]},
            "recommendationGroups": [
                {"scopeValue": "za", "containerRecommendations": [{"containerName": "agent", "target": {"cpu": "600m", "memory": "600Mi"}}]},
                {"scopeValue": "zb", "containerRecommendations": [{"containerName": "agent", "target": {"cpu": "50m", "memory": "64Mi"}}]}]}})
}

async fn pod(client: &Client, ds: &str, ds_uid: &str, node: &str) -> String {
    let name = format!("{ds}-{node}");
    let resources = json!({"requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"cpu": "200m", "memory": "200Mi"}});
    apply(client, &json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": ds},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds, "uid": ds_uid, "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "registry.example/agent:1", "resources": resources}]}})).await;
    apply_status(client, &status(&name, &resources, false)).await;
    name
}

/// A whole pod status, as the kubelet would write it: server-side apply
/// drops the fields an earlier apply by the same manager set and this one
/// omits, so every write carries all of them.
pub(crate) fn status(name: &str, resources: &Value, infeasible: bool) -> Value {
    let mut conditions = vec![json!({"type": "Ready", "status": "True"})];
    if infeasible {
        conditions.push(
            json!({"type": "PodResizePending", "status": "True", "reason": "Infeasible",
            "message": "Node didn't have enough capacity"}),
        );
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
        "status": {"phase": "Running", "startTime": ago(2 * 86400), "conditions": conditions,
            "containerStatuses": [{"name": "agent", "image": "registry.example/agent:1", "imageID": "", "ready": true,
                "restartCount": 0, "state": {"running": {"startedAt": ago(2 * 86400)}}, "resources": resources}]}})
}

/// The webhook's status Lease, renewed `age` seconds ago.
async fn webhook_lease(client: &Client, age: i64) {
    webhook_lease_in(client, NS, age).await;
}

/// The webhook's status Lease in `ns`, renewed `age` seconds ago.
pub(crate) async fn webhook_lease_in(client: &Client, ns: &str, age: i64) {
    let renew = k8s_openapi::jiff::Timestamp::from_second(
        k8s_openapi::jiff::Timestamp::now().as_second() - age,
    )
    .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S.000000Z").to_string())
    .unwrap_or_default();
    apply(
        client,
        &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "nodescope-webhook", "namespace": ns},
        "spec": {"holderIdentity": "e2e", "leaseDurationSeconds": 60, "renewTime": renew}}),
    )
    .await;
}

fn updater(instance: &str, port: u16) -> Process {
    updater_in(NS, instance, port, &[])
}

/// `nodescope update` with its Lease and the webhook's status Lease in `ns`.
pub(crate) fn updater_in(ns: &str, instance: &str, port: u16, extra: &[&str]) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command.args([
        "update",
        "--store",
        "kube",
        "--updater-interval",
        "500ms",
        "--min-replicas",
        "1",
    ]);
    command.args([
        "--instance",
        instance,
        "--leader-elect-resource-namespace",
        ns,
        "--leader-elect-resource-name",
        "updater",
        "--leader-elect-lease-duration",
        "3s",
    ]);
    command.args([
        "--admission-controller-status-lease-namespace",
        ns,
        "--admission-controller-status-lease-timeout",
        "30s",
    ]);
    command.args(["--log-format", "json"]);
    command.arg(format!("--address=127.0.0.1:{port}"));
    command.args(extra);
    let log = std::env::temp_dir().join(format!(
        "nodescope-e2e-{instance}-{}.log",
        std::process::id()
    ));
    Process::spawn("update", command, log).unwrap_or_else(|e| panic!("{e}"))
}

/// (requests cpu, requests memory, limits cpu, limits memory) of the spec.
pub(crate) async fn spec_of(pods: &Api<Pod>, name: &str) -> (String, String, String, String) {
    let pod = pods
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let r = pod
        .spec
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.resources)
        .unwrap_or_default();
    let q = |m: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
             k: &str| {
        m.as_ref()
            .and_then(|m| m.get(k))
            .map(|q| q.0.clone())
            .unwrap_or_default()
    };
    (
        q(&r.requests, "cpu"),
        q(&r.requests, "memory"),
        q(&r.limits, "cpu"),
        q(&r.limits, "memory"),
    )
}

/// Plays the kubelet: the spec's resources become the actuated ones.
/// `nodescope update --plan --store kube -o json --min-replicas 1` against
/// the cluster, with the webhook's Lease looked for in `ns`: the (action,
/// message) of pod `name` (the message is the sentence; `reason` its few
/// words).
pub(crate) fn plan_row(ns: &str, name: &str, extra: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args([
            "update",
            "--plan",
            "--store",
            "kube",
            "-o",
            "json",
            "--min-replicas",
            "1",
        ])
        .args(["--admission-controller-status-lease-namespace", ns])
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("update --plan: {e}"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("update --plan -o json: {e}"));
    let item = plan["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["pod"] == name)
        .unwrap_or_else(|| panic!("{name} not in the plan: {plan}"));
    (
        item["action"].as_str().unwrap_or_default().to_owned(),
        item["message"].as_str().unwrap_or_default().to_owned(),
    )
}

async fn actuate(client: &Client, pods: &Api<Pod>, name: &str) {
    let pod = pods
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let resources = pod
        .spec
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.resources);
    let resources = serde_json::to_value(resources).unwrap_or_default();
    apply_status(client, &status(name, &resources, false)).await;
}

async fn resized(pods: &Api<Pod>, names: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for n in names {
        if spec_of(pods, n).await.0 != "100m" {
            out.push(n.clone());
        }
    }
    out
}

/// Passes the two replicas have finished (only the leader passes).
async fn passes(ports: (u16, u16)) -> u64 {
    let mut total = 0;
    for port in [ports.0, ports.1] {
        let text = crate::support::nodescope::scrape(port).await;
        total += text
            .lines()
            .find_map(|l| {
                l.strip_prefix("nodescope_updater_execution_latency_seconds_count{step=\"total\"} ")
            })
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

/// Waits until the leader has begun and finished a whole pass after this
/// call: what it would do with the cluster as it is now, it has done. A
/// check that something did not happen follows this, never a sleep.
async fn a_whole_pass(ports: (u16, u16)) {
    let now = passes(ports).await;
    eventually("two more updater passes", LIMIT, || async move {
        (passes(ports).await >= now + 2).then_some(())
    })
    .await;
}

async fn event_reasons(client: &Client, pod: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let list = events
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("events: {e}"));
    list.items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(pod))
        .filter_map(|e| e.reason)
        .collect()
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    apply(
        &client,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    for (node, zone) in NODES {
        apply(&client, &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": zone}}})).await;
        apply_status(&client, &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
            "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}, "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}})).await;
    }
    webhook_lease(&client, 0).await;
    let mut uids = std::collections::HashMap::new();
    for (ds, mode) in [
        ("agent", "InPlaceOrRecreate"),
        ("inplace", "InPlace"),
        ("initial", "Initial"),
        ("off", "Off"),
    ] {
        let desired = if ds == "agent" { 4 } else { 1 };
        let created = apply(&client, &daemonset(ds, desired)).await;
        apply_status(&client, &daemonset(ds, desired)).await;
        uids.insert(ds, created.metadata.uid.unwrap_or_default());
        apply(&client, &vpa(ds, mode)).await;
        apply_status(&client, &vpa(ds, mode)).await;
    }
    let mut agents = Vec::new();
    for (node, _) in NODES {
        agents.push(pod(&client, "agent", &uids["agent"], node).await);
    }
    let inplace = pod(&client, "inplace", &uids["inplace"], NODES[0].0).await;
    let initial = pod(&client, "initial", &uids["initial"], NODES[0].0).await;
    let off = pod(&client, "off", &uids["off"], NODES[0].0).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    let (port_a, port_b) = (crate::support::free_port(), crate::support::free_port());
    let mut a = updater("e2e-updater-a", port_a);
    let mut b = updater("e2e-updater-b", port_b);

    // InPlaceOrRecreate: two of four at a time (--eviction-tolerance 0.5).
    let first = eventually("the first two resizes", LIMIT, || async {
        let r = resized(&pods, &agents).await;
        (r.len() >= 2).then_some(r)
    })
    .await;
    a_whole_pass((port_a, port_b)).await;
    assert_eq!(
        resized(&pods, &agents).await,
        first,
        "never more than the tolerance at once"
    );
    for name in &first {
        actuate(&client, &pods, name).await;
    }
    eventually("the other two resizes", LIMIT, || async {
        (resized(&pods, &agents).await.len() == 4).then_some(())
    })
    .await;
    for (name, (_, zone)) in agents.iter().zip(NODES) {
        let want = if zone == "za" {
            ("600m", "600Mi", "1200m", "1200Mi")
        } else {
            ("50m", "64Mi", "100m", "128Mi")
        };
        let got = spec_of(&pods, name).await;
        assert_eq!(
            (
                got.0.as_str(),
                got.1.as_str(),
                got.2.as_str(),
                got.3.as_str()
            ),
            want,
            "{name} in {zone}"
        );
        actuate(&client, &pods, name).await;
        // Events are sent beside the writes (update/events.rs), so after them.
        eventually(&format!("{name}: InPlaceResizedByVPA"), LIMIT, || async {
            event_reasons(&client, name)
                .await
                .contains(&"InPlaceResizedByVPA".to_owned())
                .then_some(())
        })
        .await;
    }

    // The plan against the cluster agrees: nothing left to do for them.
    for name in &agents {
        assert_eq!(
            plan_row(NS, name, &[]),
            ("none".to_owned(), "at its recommendation".to_owned())
        );
    }

    // Only the leader acted.
    let (ma, mb) = (
        crate::support::nodescope::scrape(port_a).await,
        crate::support::nodescope::scrape(port_b).await,
    );
    let leads = |m: &str| m.lines().any(|l| l == "nodescope_updater_leader 1");
    let resizes = |m: &str| {
        m.lines().any(|l| {
            l.starts_with("nodescope_updater_in_place_updated_pods_total ") && !l.ends_with(" 0")
        })
    };
    assert!(leads(&ma) != leads(&mb), "exactly one leader:\n{ma}\n{mb}");
    let (leader, follower) = if leads(&ma) { (&ma, &mb) } else { (&mb, &ma) };
    assert!(
        resizes(leader) && !resizes(follower),
        "only the leader resized:\n{leader}\n{follower}"
    );

    // Initial and Off never touch a pod; InPlace resizes.
    assert_eq!(spec_of(&pods, &initial).await.0, "100m");
    assert_eq!(spec_of(&pods, &off).await.0, "100m");
    eventually("the InPlace pod resized", LIMIT, || async {
        (spec_of(&pods, &inplace).await.0 == "600m").then_some(())
    })
    .await;

    // An Infeasible resize: the kubelet's condition on agent on n3 and the
    // InPlace pod, after a new, larger group for zb and za.
    let mut bigger = vpa("agent", "InPlaceOrRecreate");
    bigger["status"]["recommendationGroups"][1]["containerRecommendations"][0]["target"] =
        json!({"cpu": "7", "memory": "64Mi"});
    apply_status(&client, &bigger).await;
    let victim = agents[2].clone();
    let other = agents[3].clone();
    eventually("both zb pods asked to grow", LIMIT, || async {
        (spec_of(&pods, &victim).await.0 == "7" && spec_of(&pods, &other).await.0 == "7")
            .then_some(())
    })
    .await;
    // The kubelet of n4 actuates; the one of n3 cannot.
    actuate(&client, &pods, &other).await;
    // The actuated resources stay the old ones: the kubelet refused.
    let infeasible = |name: &str, old: Value| status(name, &old, true);
    let was = |cpu: &str, memory: &str, lcpu: &str, lmem: &str| json!({"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": lcpu, "memory": lmem}});
    // First with a stale webhook Lease: no eviction.
    webhook_lease(&client, 3600).await;
    a_whole_pass((port_a, port_b)).await;
    apply_status(
        &client,
        &infeasible(&victim, was("50m", "64Mi", "100m", "128Mi")),
    )
    .await;
    apply_status(
        &client,
        &infeasible(&inplace, was("100m", "100Mi", "200m", "200Mi")),
    )
    .await;
    a_whole_pass((port_a, port_b)).await;
    let stale = pods.get(&victim).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        stale.metadata.deletion_timestamp.is_none(),
        "evicted while the webhook Lease was stale"
    );
    assert!(!event_reasons(&client, &victim)
        .await
        .contains(&"EvictionBlocked".to_owned()));
    // Fresh again, with a PodDisruptionBudget that allows nothing: the
    // refusal is reported.
    apply(&client, &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "agent", "namespace": NS},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "agent"}}}})).await;
    webhook_lease(&client, 0).await;
    eventually("the blocked eviction reported", LIMIT, || async {
        event_reasons(&client, &victim)
            .await
            .contains(&"EvictionBlocked".to_owned())
            .then_some(())
    })
    .await;
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client.clone(), NS);
    pdbs.delete("agent", &kube::api::DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eventually("agent on n3 evicted", LIMIT, || async {
        pods.get(&victim)
            .await
            .ok()
            .and_then(|p| p.metadata.deletion_timestamp)
            .map(|_| ())
    })
    .await;
    eventually("EvictedByVPA on the evicted pod", LIMIT, || async {
        event_reasons(&client, &victim)
            .await
            .contains(&"EvictedByVPA".to_owned())
            .then_some(())
    })
    .await;
    // InPlace never evicts.
    a_whole_pass((port_a, port_b)).await;
    let kept = pods.get(&inplace).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "InPlace evicted a pod"
    );
    assert_eq!(spec_of(&pods, &off).await.0, "100m");
    assert_eq!(spec_of(&pods, &initial).await.0, "100m");

    a.stop(Duration::from_secs(5));
    b.stop(Duration::from_secs(5));
    println!("e2e: update: 4 InPlaceOrRecreate pods resized to their zone's group two at a time; Infeasible led to eviction (blocked by a PDB and reported, withheld while the webhook Lease was stale); InPlace, Initial and Off never evicted or touched; one leader of two");
}
