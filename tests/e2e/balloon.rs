//! `nodescope balloon` against the control plane, with the bundle's
//! balloon-resize policy and the balloon component's RBAC applied. envtest
//! has no kubelet, so the step binds the pods, writes their status (Running
//! and the actuated resources) and the Node's allocatable, and copies a
//! resized spec into the status as the kubelet would.
//!
//! Shown: `balloon set --wait` leads to a `pods/resize` by the controller
//! (as kube-system:node-resizer) whose stored spec has exactly the computed
//! requests, limits kept equal; an upsize the node's other pods do not fit
//! under is refused with an Event and the Node's state annotation; a resize
//! by anyone else is denied by the policy; `balloon status -o json` shows
//! the usable capacity; of two controllers only the leader writes. The
//! bundle's node-resizer policy holds the controller's identity to balloon
//! resizes and nodescope.dev/* annotations of Nodes, which is all the
//! controller needs.

use crate::support::cluster::{apply, apply_status, documents};
use crate::support::{eventually, ControlPlane, Process};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

const NS: &str = "e2e-balloon";
const NODE: &str = "e2e-bal-n1";
const BALLOON: &str = "e2e-balloon-n1";
const LIMIT: Duration = Duration::from_secs(30);
const RESIZER: &str = "system:serviceaccount:kube-system:node-resizer";

/// A whole pod status, as the kubelet would write it (server-side apply
/// drops what the same manager set before and this write omits).
fn status(namespace: &str, name: &str, container: &str, resources: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
        "status": {"phase": "Running", "startTime": "2026-11-25T08:00:00Z",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": container, "image": "registry.k8s.io/pause:3.10", "imageID": "",
                "ready": true, "restartCount": 0, "state": {"running": {}}, "resources": resources}]}})
}

/// The balloon's spec resources: (requests cpu, memory, limits cpu, memory).
async fn spec_of(pods: &Api<Pod>) -> (String, String, String, String) {
    let pod = pods
        .get(BALLOON)
        .await
        .unwrap_or_else(|e| panic!("{BALLOON}: {e}"));
    let r = pod
        .spec
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.resources)
        .unwrap_or_default();
    let get = |m: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
               k: &str| {
        m.as_ref()
            .and_then(|m| m.get(k))
            .map(|q| q.0.clone())
            .unwrap_or_default()
    };
    (
        get(&r.requests, "cpu"),
        get(&r.requests, "memory"),
        get(&r.limits, "cpu"),
        get(&r.limits, "memory"),
    )
}

/// A kubeconfig that acts as kube-system:node-resizer.
fn resizer_kubeconfig(plane: &ControlPlane) -> std::path::PathBuf {
    let text = std::fs::read_to_string(&plane.kubeconfig)
        .unwrap_or_else(|e| panic!("{}: {e}", plane.kubeconfig.display()));
    let text = text.replacen("  user:\n", &format!("  user:\n    as: {RESIZER}\n"), 1);
    let path = plane.kubeconfig.with_file_name("kubeconfig-node-resizer");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

fn controller(kubeconfig: &std::path::Path, instance: &str, port: u16) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command
        .env("KUBECONFIG", kubeconfig)
        .args(["balloon", "controller", "--interval", "500ms"])
        .args(["--instance", instance, "--lease-duration", "3s"])
        .args(["--log-format", "json"])
        .arg(format!("--metrics-listen=127.0.0.1:{port}"));
    let log = std::env::temp_dir().join(format!(
        "nodescope-e2e-{instance}-{}.log",
        std::process::id()
    ));
    Process::spawn("balloon", command, log).unwrap_or_else(|e| panic!("{e}"))
}

fn nodescope(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("nodescope {args:?}: {e}"))
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    apply(
        &client,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    let root = env!("CARGO_MANIFEST_DIR");
    // The policies as the bundle ships them (install applied the resizers
    // ConfigMap already; this is the same text), and the component's RBAC.
    let mut policy = documents(&format!("{root}/policies/balloon-resize.yaml"));
    let narrowing = documents(&format!("{root}/policies/node-resizer.yaml"));
    policy.extend(narrowing.iter().cloned());
    policy.sort_by_key(|o| o["kind"] != "ConfigMap");
    let rbac = documents(&format!("{root}/manifests/components/balloon/rbac.yaml"));
    for object in policy.iter().chain(&rbac) {
        apply(&client, object).await;
    }
    apply(
        &client,
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}),
    )
    .await;
    apply_status(&client, &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})).await;
    let small = json!({"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}});
    apply(&client, &json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": BALLOON, "namespace": "kube-system", "labels": {"node.kubernetes.io/balloon": "true"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "balloon", "image": "registry.k8s.io/pause:3.10", "resources": small}]}})).await;
    apply_status(&client, &status("kube-system", BALLOON, "balloon", &small)).await;
    let web = json!({"requests": {"cpu": "2", "memory": "4Gi"}});
    apply(&client, &json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"nodeName": NODE, "containers": [{"name": "web", "image": "registry.example/web:1", "resources": web}]}})).await;
    apply_status(&client, &status(NS, "web", "web", &web)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");

    // Before the controllers start: as node-resizer, RBAC lets every write
    // below through and the node-resizer policy refuses all but the last.
    narrowed(plane).await;

    let kubeconfig = resizer_kubeconfig(plane);
    let (port_a, port_b) = (crate::support::free_port(), crate::support::free_port());
    let mut a = controller(&kubeconfig, "e2e-balloon-a", port_a);
    let mut b = controller(&kubeconfig, "e2e-balloon-b", port_b);

    // `set --wait` returns once the kubelet (here the step) actuated it.
    let set = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args([
            "balloon",
            "set",
            NODE,
            "--usable-cpu",
            "6",
            "--usable-memory",
            "24Gi",
        ])
        .args(["--wait", "--timeout", "60s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("balloon set: {e}"));
    let resized = eventually("the balloon resized to 2 cpu, 8Gi", LIMIT, || async {
        let spec = spec_of(&pods).await;
        (spec.0 != "500m").then_some(spec)
    })
    .await;
    assert_eq!(
        resized,
        ("2".into(), "8Gi".into(), "2".into(), "8Gi".into()),
        "exactly allocatable minus usable, requests = limits kept"
    );
    let actuated =
        json!({"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"cpu": "2", "memory": "8Gi"}});
    apply_status(
        &client,
        &status("kube-system", BALLOON, "balloon", &actuated),
    )
    .await;
    let waited = tokio::task::spawn_blocking(move || set.wait_with_output())
        .await
        .unwrap_or_else(|e| panic!("balloon set: {e}"))
        .unwrap_or_else(|e| panic!("balloon set: {e}"));
    let said = String::from_utf8_lossy(&waited.stdout).into_owned();
    assert_eq!(waited.status.code(), Some(0), "{said}");
    assert!(
        said.contains("Settled: the balloon holds cpu 2, memory 8Gi as asked"),
        "{said}"
    );

    // status -o json: the usable capacity, balloon space counted as absent.
    let out = nodescope(&["balloon", "status", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let item = report["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["node"] == NODE))
        .cloned()
        .unwrap_or_else(|| panic!("{NODE} missing: {report}"));
    assert_eq!(item["usable"], json!({"cpu": "6", "memory": "24Gi"}));
    assert_eq!(item["balloon"], json!({"cpu": "2", "memory": "8Gi"}));
    assert_eq!(item["requested"], json!({"cpu": "2", "memory": "4Gi"}));
    assert_eq!(item["free"], json!({"cpu": "4", "memory": "20Gi"}));
    assert_eq!(item["state"], "Settled");

    // An upsize that web does not fit under: refused, with an Event.
    let out = nodescope(&[
        "balloon",
        "set",
        NODE,
        "--usable-cpu",
        "1",
        "--usable-memory",
        "24Gi",
        "--wait",
    ]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{said}");
    let refusal = "upsizing the balloon to cpu 7, memory 8Gi leaves cpu 1, memory 24Gi usable, \
        but the node's other pods request cpu 2, memory 4Gi: e2e-balloon/web does not fit";
    assert!(said.contains(&format!("Refused: {refusal}")), "{said}");
    let events: Api<Event> = Api::all(client.clone());
    let note = eventually("the refusal's Event on the Node", LIMIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| {
                e.involved_object.kind.as_deref() == Some("Node")
                    && e.involved_object.name.as_deref() == Some(NODE)
                    && e.reason.as_deref() == Some("BalloonUpsizeRefused")
            })
            .and_then(|e| e.message)
    })
    .await;
    assert_eq!(note, refusal);
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get(NODE).await.unwrap_or_else(|e| panic!("{e}"));
    let annotations = node.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations
            .get("nodescope.dev/balloon-state")
            .map(String::as_str),
        Some("Refused")
    );
    assert_eq!(spec_of(&pods).await.0, "2", "never resized for a refusal");

    // Anyone else's resize of a balloon: denied by the shipped policy.
    let denied = pods
        .patch_subresource(
            "resize",
            BALLOON,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Strategic(json!({"spec": {"containers": [{"name": "balloon",
                "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "3"}}}]}})),
        )
        .await;
    match denied {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{}", status.message);
            assert!(
                status.message.contains("ValidatingAdmissionPolicy 'nodescope-balloon-resize'")
                    && status.message.contains(
                        "resizing a balloon pod is reserved to the identities in ConfigMap kube-system/nodescope-balloon-resizers"
                    ),
                "{}",
                status.message
            );
        }
        other => panic!("the admin's resize of a balloon was not denied: {other:?}"),
    }

    // Two controllers, one leader: only the leader resized.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let holder = leases
        .get("nodescope-balloon")
        .await
        .ok()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    let (leader, other) = if holder == "e2e-balloon-a" {
        (port_a, port_b)
    } else {
        assert_eq!(holder, "e2e-balloon-b");
        (port_b, port_a)
    };
    let (leading, following) = (
        crate::support::nodescope::scrape(leader).await,
        crate::support::nodescope::scrape(other).await,
    );
    assert!(
        leading.contains("nodescope_balloon_resize_results_total{outcome=\"Resized\"} 1"),
        "{leading}"
    );
    assert!(leading.contains("nodescope_balloon_leader 1"), "{leading}");
    assert!(
        following.contains("nodescope_balloon_resize_results_total{outcome=\"Resized\"} 0")
            && following.contains("nodescope_balloon_resize_results_total{outcome=\"Refused\"} 0")
            && following.contains("nodescope_balloon_leader 0"),
        "{following}"
    );
    assert!(
        following.contains(&format!(
            "nodescope_balloon_usable{{node=\"{NODE}\",resource=\"cpu\"}} 6.0"
        )),
        "{following}"
    );

    a.stop(Duration::from_secs(5));
    b.stop(Duration::from_secs(5));
    // The policy stays: removing its param kind's last binding would stop
    // the apiserver following ConfigMaps (kubernetes/kubernetes#130887).
    for object in rbac.iter().rev().chain(narrowing.iter().rev()) {
        crate::support::cluster::delete(&client, object).await;
    }
    println!("e2e: balloon: set --wait resized the balloon as node-resizer to exactly 2 cpu, 8Gi (limits kept equal); an upsize web did not fit under was refused with an Event and the Node's state; the admin's resize denied by the policy; status -o json showed usable cpu 6, memory 24Gi; one leader of two wrote; as node-resizer, resizing web and changing the Node's labels, spec or another annotation were refused by nodescope-node-resizer, a nodescope.dev annotation taken");
}

/// What the node-resizer policy refuses of kube-system:node-resizer, and
/// what it lets through; every write a dry run, so nothing changes.
async fn narrowed(plane: &ControlPlane) {
    use kube::api::{Patch, PatchParams};
    let mut config = plane.config().await;
    config.auth_info.impersonate = Some(RESIZER.to_owned());
    let resizer = kube::Client::try_from(config).unwrap_or_else(|e| panic!("client: {e}"));
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let pods: Api<Pod> = Api::namespaced(resizer.clone(), NS);
    let nodes: Api<Node> = Api::all(resizer);
    let prefix = "ValidatingAdmissionPolicy 'nodescope-node-resizer' with binding 'nodescope-node-resizer' denied request: system:serviceaccount:kube-system:node-resizer may ";
    let resize =
        json!({"spec": {"containers": [{"name": "web", "resources": {"requests": {"cpu": "3"}}}]}});
    let refusals = [
        (
            "resize web",
            format!("{prefix}resize only balloon pods (label node.kubernetes.io/balloon: \"true\"), not pod {NS}/web"),
        ),
        (
            "label the Node",
            format!("{prefix}change only nodescope.dev/* annotations of a Node, not its labels (Node {NODE})"),
        ),
        (
            "cordon the Node",
            format!("{prefix}change only nodescope.dev/* annotations of a Node, not its spec (Node {NODE})"),
        ),
        (
            "annotate the Node",
            format!("{prefix}change only nodescope.dev/* annotations of a Node, not annotation example.com/owner of Node {NODE}"),
        ),
    ];
    for (what, message) in refusals {
        let answer = || async {
            match what {
                "resize web" => pods
                    .patch_subresource("resize", "web", &dry, &Patch::Strategic(&resize))
                    .await
                    .map(|_| ()),
                "label the Node" => nodes
                    .patch(
                        NODE,
                        &dry,
                        &Patch::Merge(json!({"metadata": {"labels": {"example.com/pool": "a"}}})),
                    )
                    .await
                    .map(|_| ()),
                "cordon the Node" => nodes
                    .patch(
                        NODE,
                        &dry,
                        &Patch::Merge(json!({"spec": {"unschedulable": true}})),
                    )
                    .await
                    .map(|_| ()),
                _ => nodes
                    .patch(
                        NODE,
                        &dry,
                        &Patch::Merge(
                            json!({"metadata": {"annotations": {"example.com/owner": "a"}}}),
                        ),
                    )
                    .await
                    .map(|_| ()),
            }
        };
        // The binding was just applied: wait for the apiserver to enforce it.
        let status = eventually(&format!("node-resizer may not {what}"), LIMIT, || async {
            match answer().await {
                // RBAC's own 403 comes first while the bindings propagate.
                Err(kube::Error::Api(status))
                    if status.code == 403 && status.message.contains("nodescope-node-resizer") =>
                {
                    Some(status)
                }
                _ => None,
            }
        })
        .await;
        assert!(
            status.message.ends_with(&message),
            "{what}: {}",
            status.message
        );
    }
    let taken = nodes
        .patch(
            NODE,
            &dry,
            &Patch::Merge(
                json!({"metadata": {"annotations": {"nodescope.dev/balloon-reason": "e2e"}}}),
            ),
        )
        .await;
    assert!(taken.is_ok(), "a nodescope.dev annotation: {taken:?}");
}
