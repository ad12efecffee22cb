//! A hollow apiserver for the scale bench (issue 43): the generated
//! cluster of [`generate`] served on loopback, as kubemark's hollow nodes
//! stand in for kubelets. See [`server`] for what it answers.

pub mod generate;
pub mod list;
pub mod measure;
pub mod process;
pub mod selector;
pub mod server;
pub mod store;
pub mod watch;
pub mod write;

use server::{lock, State};
use std::sync::{Arc, Mutex, RwLock};
use store::{resource, Collection, Hollow, Objects};

/// The cluster's size.
pub struct Size {
    pub nodes: usize,
}

/// Generates the cluster and holds it pre-serialized (a node's pods are
/// serialized and dropped before the next's are made).
pub fn state(size: &Size) -> State {
    let mut pods = Vec::with_capacity(size.nodes * generate::PODS_PER_NODE);
    let mut nodes = Vec::with_capacity(size.nodes);
    for i in 0..size.nodes {
        nodes.push(Hollow::of(&generate::node(i)));
        pods.extend(generate::pods_of(i).iter().map(Hollow::of));
    }
    let mut objects = Objects::default();
    let put =
        |objects: &mut Objects, group: &str, version: &str, plural: &str, v: serde_json::Value| {
            let r = resource(group, version, plural)
                .unwrap_or_else(|| panic!("{plural} is not served"));
            objects.put(r, v);
        };
    for ns in generate::namespaces() {
        put(
            &mut objects,
            "",
            "v1",
            "namespaces",
            serde_json::json!({"metadata": {"name": ns,
            "labels": {"kubernetes.io/metadata.name": ns}}, "status": {"phase": "Active"}}),
        );
    }
    for d in 0..generate::DAEMONSETS.len() {
        put(
            &mut objects,
            "apps",
            "v1",
            "daemonsets",
            generate::daemonset(d, size.nodes),
        );
        put(
            &mut objects,
            "autoscaling.k8s.io",
            "v1",
            "verticalpodautoscalers",
            generate::vpa(d, size.nodes),
        );
    }
    for doc in generate::bundle() {
        let api = doc["apiVersion"].as_str().unwrap_or_default().to_owned();
        let (group, version) = api.split_once('/').unwrap_or(("", &api));
        let kind = doc["kind"].as_str().unwrap_or_default();
        let Some(r) = store::RESOURCES
            .iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
        else {
            panic!("the bundle's {kind} ({api}) is not served");
        };
        objects.put(r, doc);
    }
    let (changes, _) = tokio::sync::broadcast::channel(1 << 16);
    State {
        pods: RwLock::new(Collection::new(pods)),
        nodes: RwLock::new(Collection::new(nodes)),
        objects: Mutex::new(objects),
        changes,
        component: Mutex::new(String::new()),
        tallies: Mutex::default(),
        queries: Mutex::default(),
        refused: Mutex::default(),
        mark: Mutex::default(),
        marks: Mutex::default(),
    }
}

/// Serves `state` on 127.0.0.1; returns the port.
pub async fn serve(state: Arc<State>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let state = state.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |r| server::handle(state.clone(), r));
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
            });
        }
    });
    port
}

/// Counts what follows under `component`.
pub fn measure_as(state: &State, component: &str) {
    *lock(&state.component) = component.to_owned();
}

/// A kubeconfig for the hollow apiserver at `port` (plain HTTP).
pub fn kubeconfig(path: &std::path::Path, port: u16) {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: hollow\n  cluster:\n    server: http://127.0.0.1:{port}\n\
         contexts:\n- name: hollow\n  context:\n    cluster: hollow\n    user: bench\n    namespace: nodescope-system\n\
         current-context: hollow\nusers:\n- name: bench\n  user:\n    token: hollow\n"
    );
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
