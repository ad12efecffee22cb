//! The watch side: each event read down to what is kept, and the
//! controller's plans equal to `balloon status`'s for the same objects.

use super::pods::Held;
use super::sizing_tests::{node_json, pod_json};
use super::watched::{lock, NodeWatch, PodWatch, Watched, Written};
use super::{plan, plan_objects, BalloonConfig, CpuMemory, NodePlan, State};
use crate::json::text::ObjectText;
use crate::quantity::Quantity;
use crate::throttle::Throttle;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher::Event;
use serde_json::{json, Value};
use std::sync::Mutex;

fn typed<K: serde::de::DeserializeOwned>(v: &Value) -> K {
    serde_json::from_value(v.clone()).expect("a valid object")
}

/// An object as a list page or watch event carries it: no `kind` or
/// `apiVersion`, its text.
fn item(v: &Value) -> ObjectText {
    let mut v = v.clone();
    if let Some(map) = v.as_object_mut() {
        map.remove("kind");
        map.remove("apiVersion");
    }
    ObjectText::from_value(&v).expect("an object")
}

fn pair(cpu: &str, memory: &str) -> CpuMemory {
    CpuMemory {
        cpu: Quantity::parse(cpu).expect("cpu"),
        memory: Quantity::parse(memory).expect("memory"),
    }
}

fn usable(cpu: &str, memory: &str) -> Value {
    json!({"nodescope.dev/usable-cpu": cpu, "nodescope.dev/usable-memory": memory})
}

fn requests(cpu: &str, memory: &str) -> Value {
    json!({"requests": {"cpu": cpu, "memory": memory}})
}

fn workload(name: &str, node: &str, cpu: &str, memory: &str, start: &str) -> Value {
    pod_json(name, node, false, requests(cpu, memory), start)
}

fn balloon(node: &str, cpu: &str, memory: &str) -> Value {
    pod_json(
        &format!("balloon-{node}"),
        node,
        true,
        requests(cpu, memory),
        "2026-11-25T08:00:00Z",
    )
}

/// A state fed a whole list through both watches.
struct Fed {
    state: Mutex<Watched>,
    nodes: NodeWatch,
    pods: PodWatch,
    throttle: Throttle,
}

impl Fed {
    fn new() -> Fed {
        Fed {
            state: Mutex::new(Watched::default()),
            nodes: NodeWatch::default(),
            pods: PodWatch::default(),
            throttle: Throttle::new(),
        }
    }

    fn node(&mut self, event: Event<Node>) {
        self.nodes.on(event, &self.state, &self.throttle);
    }

    fn pod(&mut self, event: Event<ObjectText>) {
        self.pods.on(event, &self.state, &self.throttle);
    }

    /// A relist of `objects` (Nodes and Pods) through both watches.
    fn relist(&mut self, objects: &[Value]) {
        self.node(Event::Init);
        self.pod(Event::Init);
        for o in objects {
            match o["kind"].as_str() {
                Some("Node") => self.node(Event::InitApply(typed(o))),
                Some("Pod") => self.pod(Event::InitApply(item(o))),
                _ => {}
            }
        }
        self.node(Event::InitDone);
        self.pod(Event::InitDone);
    }

    fn plans(&self) -> Vec<NodePlan> {
        let s = lock(&self.state);
        plan(
            s.nodes.values().map(|n| &n.node),
            &s.pods,
            &BalloonConfig::default(),
        )
    }

    /// The requests the state holds for `key`.
    fn requests_of(&self, key: &str) -> Option<(String, CpuMemory)> {
        let s = lock(&self.state);
        let pod = s.pods.get(key)?;
        match &pod.held {
            Held::Requests(Ok(r)) => Some((pod.node.to_string(), r.clone())),
            other => panic!("{key}: {other:?}"),
        }
    }
}

#[test]
fn a_node_and_a_pod_applied_are_kept_compact_and_a_delete_forgets_them() {
    let mut fed = Fed::new();
    fed.relist(&[]);
    assert!(lock(&fed.state).synced());
    let mut node = node_json("n1", usable("6", "24Gi"));
    node["metadata"]["annotations"]["nodescope.dev/balloon-state"] = json!("Settled");
    node["metadata"]["annotations"]["nodescope.dev/balloon-reason"] = json!("as asked");
    fed.node(Event::Apply(typed(&node)));
    let web = workload("web", "n1", "1", "1Gi", "2026-11-25T09:00:00Z");
    fed.pod(Event::Apply(item(&web)));
    {
        let s = lock(&fed.state);
        let kept = &s.nodes["n1"];
        assert_eq!(kept.node.allocatable, pair("8", "32Gi"));
        assert_eq!(
            kept.written,
            Written {
                uid: Some("uid-n1".into()),
                state: Some("Settled".into()),
                reason: Some("as asked".into()),
            }
        );
    }
    assert_eq!(
        fed.requests_of("default/web"),
        Some(("n1".into(), pair("1", "1Gi")))
    );
    fed.pod(Event::Delete(item(&web)));
    fed.node(Event::Delete(typed(&node)));
    let s = lock(&fed.state);
    assert_eq!((s.nodes.len(), s.pods.len()), (0, 0));
}

#[test]
fn a_relist_replaces_the_state_only_when_it_is_done() {
    let mut fed = Fed::new();
    fed.relist(&[
        node_json("n1", json!({})),
        node_json("n2", json!({})),
        workload("a", "n1", "1", "1Gi", "2026-11-25T09:00:00Z"),
        workload("b", "n2", "1", "1Gi", "2026-11-25T09:00:00Z"),
    ]);
    fed.node(Event::Init);
    fed.pod(Event::Init);
    fed.node(Event::InitApply(typed(&node_json("n3", json!({})))));
    fed.pod(Event::InitApply(item(&workload(
        "c",
        "n3",
        "2",
        "2Gi",
        "2026-11-25T09:00:00Z",
    ))));
    {
        // Mid-relist, a pass still sees the last whole list.
        let s = lock(&fed.state);
        let mut names: Vec<&str> = s.nodes.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["n1", "n2"]);
        assert_eq!(s.pods.len(), 2);
    }
    fed.node(Event::InitDone);
    fed.pod(Event::InitDone);
    let s = lock(&fed.state);
    assert_eq!(s.nodes.keys().collect::<Vec<_>>(), ["n3"]);
    assert_eq!(s.pods.len(), 1);
    assert_eq!(s.pods.on("n1").count(), 0);
    assert_eq!(
        s.pods.on("n3").map(|p| &*p.key).collect::<Vec<_>>(),
        ["default/c"]
    );
}

#[test]
fn a_pod_that_moves_or_changes_its_requests_moves_or_changes_its_nodes_view() {
    let mut fed = Fed::new();
    fed.relist(&[
        node_json("n1", usable("6", "24Gi")),
        node_json("n2", usable("6", "24Gi")),
        balloon("n1", "2", "8Gi"),
        balloon("n2", "2", "8Gi"),
        workload("web", "n1", "1", "1Gi", "2026-11-25T09:00:00Z"),
    ]);
    let requested =
        |fed: &Fed| -> Vec<CpuMemory> { fed.plans().into_iter().map(|p| p.requested).collect() };
    assert_eq!(requested(&fed), [pair("1", "1Gi"), pair("0", "0")]);
    let bigger = workload("web", "n1", "3", "5Gi", "2026-11-25T09:00:00Z");
    fed.pod(Event::Apply(item(&bigger)));
    assert_eq!(requested(&fed), [pair("3", "5Gi"), pair("0", "0")]);
    let moved = workload("web", "n2", "3", "5Gi", "2026-11-25T09:00:00Z");
    fed.pod(Event::Apply(item(&moved)));
    assert_eq!(requested(&fed), [pair("0", "0"), pair("3", "5Gi")]);
    assert_eq!(lock(&fed.state).pods.on("n1").count(), 1, "the balloon");
    let mut done = moved.clone();
    done["status"]["phase"] = json!("Succeeded");
    fed.pod(Event::Apply(item(&done)));
    assert_eq!(requested(&fed), [pair("0", "0"), pair("0", "0")]);
    assert_eq!(lock(&fed.state).pods.len(), 2);
}

/// What the lines logged while `run` runs say (the balloon tests' one
/// log capture).
pub(super) fn logged(run: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Lines(std::sync::Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("unpoisoned").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, run);
    let bytes = lines.0.lock().expect("unpoisoned").clone();
    String::from_utf8(bytes).expect("utf-8")
}

#[test]
fn an_object_that_cannot_be_read_is_left_out_named_and_what_was_kept_forgotten() {
    let mut fed = Fed::new();
    let web = workload("web", "n1", "1", "1Gi", "2026-11-25T09:00:00Z");
    let node = node_json("n1", json!({}));
    fed.relist(&[node.clone(), web.clone()]);
    let mut bad_pod = web.clone();
    bad_pod.as_object_mut().expect("an object").remove("spec");
    let mut bad_node = node.clone();
    bad_node["status"]["allocatable"]["cpu"] = json!("lots");
    let text = logged(|| {
        fed.pod(Event::Apply(item(&bad_pod)));
        fed.node(Event::Apply(typed(&bad_node)));
    });
    let s = lock(&fed.state);
    assert_eq!((s.nodes.len(), s.pods.len()), (0, 0));
    let line = |kind: &str, error: &str| {
        format!(
            " WARN nodescope::balloon::watched: object left out of the balloon pass: it cannot be read \
             kind=\"{kind}\" error=\"{error}\" suppressed=0\n"
        )
    };
    assert_eq!(
        text,
        line("Pod", "Pod default/web: spec.containers: expected an array")
            + &line(
                "Node",
                r#"Node n1: status.allocatable.cpu: quantity \"lots\" is not a number followed by an optional suffix (e.g. \"1.5\", \"250m\", \"12e6\")"#
            )
    );
}

#[test]
fn the_controller_plans_exactly_as_balloon_status_does_from_the_same_objects() {
    let mut two_balloons = balloon("n4", "1", "1Gi");
    two_balloons["metadata"]["name"] = json!("balloon-n4-b");
    let mut deferred = balloon("n5", "2", "8Gi");
    deferred["status"]["conditions"] = json!([{"type": "PodResizePending", "status": "True",
        "reason": "Deferred", "message": "not now"}]);
    let mut finished = workload("done", "n2", "7", "30Gi", "2026-11-25T09:00:00Z");
    finished["status"]["phase"] = json!("Failed");
    let mut unbound = workload("pending", "n2", "7", "30Gi", "2026-11-25T09:00:00Z");
    unbound["spec"]["nodeName"] = Value::Null;
    let objects = vec![
        // Resize: upsize that fits.
        node_json("n1", usable("6", "24Gi")),
        balloon("n1", "500m", "512Mi"),
        workload("a", "n1", "1", "1Gi", "2026-11-25T09:00:00Z"),
        // Refused, naming the pods that do not fit, oldest kept first.
        node_json("n2", usable("3", "24Gi")),
        balloon("n2", "500m", "512Mi"),
        workload("old", "n2", "2", "4Gi", "2026-11-25T09:00:00Z"),
        workload("mid", "n2", "1500m", "2Gi", "2026-11-25T09:30:00Z"),
        workload("new", "n2", "1", "1Gi", "2026-11-25T10:00:00Z"),
        finished,
        unbound,
        // NoBalloon; Invalid (two balloons); Deferred; Settled; a request
        // that is no quantity.
        node_json("n3", usable("6", "24Gi")),
        node_json("n4", usable("6", "24Gi")),
        balloon("n4", "1", "1Gi"),
        two_balloons,
        node_json("n5", usable("6", "24Gi")),
        deferred,
        node_json("n6", usable("6", "24Gi")),
        balloon("n6", "2", "8Gi"),
        node_json("n7", usable("6", "24Gi")),
        pod_json(
            "odd",
            "n7",
            false,
            requests("a lot", "1Gi"),
            "2026-11-25T09:00:00Z",
        ),
        // Neither a balloon nor a size: not planned.
        node_json("n8", json!({})),
    ];
    let offline = plan_objects(&objects, &BalloonConfig::default()).expect("readable");
    let mut fed = Fed::new();
    fed.relist(&objects);
    assert_eq!(fed.plans(), offline);
    let states: Vec<(&str, State)> = offline.iter().map(|p| (&*p.node, p.state)).collect();
    assert_eq!(
        states,
        [
            ("n1", State::Resize),
            ("n2", State::Refused),
            ("n3", State::NoBalloon),
            ("n4", State::Invalid),
            ("n5", State::Deferred),
            ("n6", State::Settled),
            ("n7", State::Invalid),
        ]
    );
    assert_eq!(
        offline[3].reason,
        "2 balloon pods on the node: kube-system/balloon-n4, kube-system/balloon-n4-b"
    );
    // Fed one event at a time, in any order, it ends in the same plans.
    let mut live = Fed::new();
    live.relist(&[]);
    for o in objects.iter().rev() {
        match o["kind"].as_str() {
            Some("Node") => live.node(Event::Apply(typed(o))),
            _ => live.pod(Event::Apply(item(o))),
        }
    }
    assert_eq!(live.plans(), offline);
}

#[test]
fn a_node_with_a_pod_that_cannot_be_read_is_left_alone_until_the_pod_reads() {
    let mut fed = Fed::new();
    let web = workload("web", "n1", "1", "1Gi", "2026-11-25T09:00:00Z");
    fed.relist(&[
        node_json("n1", json!({})),
        node_json("n2", json!({})),
        web.clone(),
    ]);
    let names = |fed: &Fed| {
        let s = lock(&fed.state);
        let mut names: Vec<String> = s.decidable().map(|n| n.name.clone()).collect();
        names.sort();
        names
    };
    assert_eq!(names(&fed), ["n1", "n2"]);
    // A pod without a namespace cannot be read (a request that is no
    // quantity is read, and makes its node Invalid in the plan).
    let mut bad = web.clone();
    bad["metadata"]
        .as_object_mut()
        .map(|m| m.remove("namespace"));
    let _ = logged(|| fed.pod(Event::Apply(item(&bad))));
    assert_eq!(
        names(&fed),
        ["n2"],
        "n1's room is not known while one of its pods cannot be read"
    );
    let mut fixed = bad.clone();
    fixed["metadata"]["namespace"] = json!("");
    let _ = logged(|| fed.pod(Event::Apply(item(&fixed))));
    assert_eq!(names(&fed), ["n1", "n2"], "read again, the pod is counted");
    let _ = logged(|| fed.pod(Event::Apply(item(&bad))));
    fed.pod(Event::Delete(item(&bad)));
    assert_eq!(names(&fed), ["n1", "n2"], "a deleted pod holds nothing");
}
