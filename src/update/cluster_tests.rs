//! The check that a pass's VPAs are still what its watch saw, against an
//! in-memory apiserver answering metadata-only GETs.

use super::*;
use bytes::Bytes;
use http_body_util::Full;
use serde_json::json;
use std::convert::Infallible;
use std::sync::Mutex;

const VPAS: &str = "/apis/autoscaling.k8s.io/v1/namespaces/monitoring/verticalpodautoscalers";

/// Answers `GET {VPAS}/{name}` with the resourceVersion `live` holds for
/// it (404 when absent, 500 for `broken`), and records each path.
fn client(live: &[(&str, &str)], calls: Arc<Mutex<Vec<String>>>) -> Client {
    let live: Vec<(String, String)> = live
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let live = live.clone();
        let calls = calls.clone();
        async move {
            let path = request.uri().path().to_owned();
            calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(format!("{} {path}", request.method()));
            let name = path.strip_prefix(&format!("{VPAS}/")).unwrap_or_default();
            let (code, body) = if name == "broken" {
                (
                    500,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500, "reason": "InternalError", "message": "etcd is away"}),
                )
            } else {
                match live.iter().find(|(n, _)| n == name) {
                    Some((_, version)) => (
                        200,
                        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                        "metadata": {"name": name, "namespace": "monitoring", "resourceVersion": version}}),
                    ),
                    None => (
                        404,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound", "message": "not found"}),
                    ),
                }
            };
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body.to_string())))
                .unwrap_or_default();
            Ok::<_, Infallible>(response)
        }
    });
    Client::new(service, "monitoring")
}

fn vpa(name: &str, version: &str) -> serde_json::Value {
    json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": "monitoring", "resourceVersion": version},
        "spec": {"scope": "node", "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name}},
    })
}

fn key(name: &str) -> (Arc<str>, Arc<str>) {
    (Arc::from("monitoring"), Arc::from(name))
}

#[tokio::test]
async fn only_the_vpas_the_apiserver_still_holds_at_the_version_seen_may_act() {
    let seen = Snapshot::build([
        vpa("current", "10"),
        vpa("behind", "11"),
        vpa("gone", "12"),
        vpa("broken", "13"),
    ]);
    let calls = Arc::default();
    let client = client(&[("current", "10"), ("behind", "15")], Arc::clone(&calls));
    let wanted = ["current", "behind", "gone", "broken", "unknown"]
        .into_iter()
        .map(key)
        .collect();
    let current = current_vpas(&client, wanted, &seen).await;
    assert_eq!(current, std::collections::HashSet::from([key("current")]));
    let mut asked = calls
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    asked.sort();
    assert_eq!(
        asked,
        ["behind", "broken", "current", "gone"].map(|n| format!("GET {VPAS}/{n}")),
        "one GET per VPA the store knows; none for a VPA it does not"
    );
}

#[test]
fn only_pods_a_daemonset_controls_are_kept_by_the_watch() {
    // As a list page carries a pod: no apiVersion or kind.
    let pod = |owners: serde_json::Value, image: serde_json::Value| {
        ObjectText::from_value(&json!({"metadata": {"name": "p", "namespace": "ns",
            "resourceVersion": "5", "ownerReferences": owners},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": image,
                "resources": {"requests": {"cpu": "100m"}}}]}}))
        .unwrap()
    };
    let owner = |api_version: &str, kind: &str, controller: bool| {
        json!({"apiVersion": api_version, "kind": kind, "name": "o", "uid": "u",
               "controller": controller})
    };
    let kept = daemonset_pod(&pod(
        json!([owner("apps/v1", "DaemonSet", true)]),
        json!("x"),
    ));
    let kept = kept.unwrap().unwrap();
    assert_eq!(
        (&*kept.namespace, &*kept.name, kept.daemonset.as_deref()),
        ("ns", "p", Some("o"))
    );
    for owners in [
        json!([]),
        json!([owner("apps/v1", "ReplicaSet", true)]),
        // Adopted by nothing: a DaemonSet that let go of it.
        json!([owner("apps/v1", "DaemonSet", false)]),
        json!([owner("extensions/v1beta1", "DaemonSet", true)]),
    ] {
        assert!(
            matches!(daemonset_pod(&pod(owners.clone(), json!("x"))), Ok(None)),
            "{owners}"
        );
    }
    // A shape the typed read declines goes through the Value read, with
    // the same answer.
    let odd = daemonset_pod(&pod(json!([owner("apps/v1", "DaemonSet", true)]), json!(7)));
    assert_eq!(odd.unwrap().unwrap(), kept);
    let bad = ObjectText::from_value(&json!({"metadata": {"name": "p", "namespace": "ns",
        "ownerReferences": [owner("apps/v1", "DaemonSet", true)]}, "spec": {"containers": 7}}))
    .unwrap();
    assert_eq!(
        daemonset_pod(&bad).unwrap_err(),
        "Pod ns/p: spec.containers: expected an array"
    );
}
