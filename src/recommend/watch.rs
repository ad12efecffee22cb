//! The recommender's view of pods and nodes, kept by watches so an interval
//! only reads memory: pods of the namespaces that have scoped VPAs (reduced
//! to [`TrackedPod`]: owner, node, memory requests, OOM kills), and node
//! labels (metadata only).
//!
//! Pods are watched per namespace, not cluster-wide: the recommender needs
//! DaemonSet pods of a few namespaces, and its RBAC does not read
//! DaemonSets, so it cannot select their pods by label; the owner is checked
//! on each pod instead.

use super::input::{NodeIndex, TrackedPod};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::discovery::ApiResource;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::task::JoinHandle;

type PodMap = HashMap<String, TrackedPod>;

/// Pods by namespace, each namespace's map replaced or updated by its watch.
#[derive(Default)]
pub struct PodWatches {
    pods: Arc<Mutex<BTreeMap<String, PodMap>>>,
    /// A namespace's watch, and whether its first list has completed.
    tasks: BTreeMap<String, (JoinHandle<()>, Arc<std::sync::atomic::AtomicBool>)>,
}

fn pod_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Pod".into(),
        plural: "pods".into(),
    }
}

fn tracked(object: &DynamicObject) -> Option<TrackedPod> {
    let mut value = serde_json::to_value(object).ok()?;
    if let Some(map) = value.as_object_mut() {
        map.insert("kind".into(), "Pod".into());
    }
    match TrackedPod::from_value(&value) {
        Ok(pod) => pod,
        Err(error) => {
            tracing::warn!(%error, "pod left out");
            None
        }
    }
}

impl PodWatches {
    /// Watches exactly `namespaces` from now on.
    pub fn watch(&mut self, client: &Client, namespaces: &[&str]) {
        self.tasks.retain(|ns, (task, _)| {
            let keep = namespaces.contains(&ns.as_str());
            if !keep {
                task.abort();
            }
            keep
        });
        {
            let mut pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
            pods.retain(|ns, _| namespaces.contains(&ns.as_str()));
        }
        for ns in namespaces {
            if self.tasks.contains_key(*ns) {
                continue;
            }
            let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let task = spawn_pods(client, ns, Arc::clone(&self.pods), Arc::clone(&ready));
            self.tasks.insert((*ns).to_owned(), (task, ready));
        }
    }

    /// Whether every watched namespace has been listed once.
    #[must_use]
    pub fn synced(&self) -> bool {
        self.tasks
            .values()
            .all(|(_, ready)| ready.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Every tracked pod now.
    #[must_use]
    pub fn snapshot(&self) -> Vec<TrackedPod> {
        let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
        pods.values().flat_map(|m| m.values().cloned()).collect()
    }
}

impl Drop for PodWatches {
    fn drop(&mut self) {
        for (task, _) in self.tasks.values() {
            task.abort();
        }
    }
}

fn spawn_pods(
    client: &Client,
    namespace: &str,
    pods: Arc<Mutex<BTreeMap<String, PodMap>>>,
    ready: Arc<std::sync::atomic::AtomicBool>,
) -> JoinHandle<()> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &pod_resource());
    let namespace = namespace.to_owned();
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut listing: PodMap = HashMap::new();
        while let Some(event) = events.next().await {
            let key = |o: &DynamicObject| o.metadata.name.clone().unwrap_or_default();
            match event {
                Ok(Event::Init) => listing.clear(),
                Ok(Event::InitApply(o)) => {
                    if let Some(p) = tracked(&o) {
                        listing.insert(key(&o), p);
                    }
                }
                Ok(Event::InitDone) => {
                    let mut all = pods.lock().unwrap_or_else(PoisonError::into_inner);
                    all.insert(namespace.clone(), std::mem::take(&mut listing));
                    ready.store(true, std::sync::atomic::Ordering::Release);
                }
                Ok(Event::Apply(o)) => {
                    let mut all = pods.lock().unwrap_or_else(PoisonError::into_inner);
                    let map = all.entry(namespace.clone()).or_default();
                    match tracked(&o) {
                        Some(p) => map.insert(key(&o), p),
                        None => map.remove(&key(&o)),
                    };
                }
                Ok(Event::Delete(o)) => {
                    let mut all = pods.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Some(map) = all.get_mut(&namespace) {
                        map.remove(&key(&o));
                    }
                }
                Err(error) => {
                    tracing::debug!(%namespace, %error, "pod watch error; backing off");
                }
            }
        }
    })
}

/// Node labels, from a metadata-only watch of every Node.
pub struct NodeWatch {
    nodes: Arc<Mutex<NodeIndex>>,
    ready: Arc<std::sync::atomic::AtomicBool>,
    task: JoinHandle<()>,
}

impl NodeWatch {
    /// Starts the watch.
    #[must_use]
    pub fn start(client: &Client) -> Self {
        let nodes = Arc::new(Mutex::new(NodeIndex::default()));
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let api: Api<PartialObjectMeta<Node>> = Api::all(client.clone());
        let (shared, flag) = (Arc::clone(&nodes), Arc::clone(&ready));
        let task = tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut listing = NodeIndex::default();
            while let Some(event) = events.next().await {
                let value = |o: &kube::core::PartialObjectMeta<Node>| serde_json::json!({"metadata": {"name": o.metadata.name, "labels": o.metadata.labels}});
                match event {
                    Ok(Event::Init) => listing = NodeIndex::default(),
                    Ok(Event::InitApply(o)) => listing.insert(&value(&o)),
                    Ok(Event::InitDone) => {
                        *shared.lock().unwrap_or_else(PoisonError::into_inner) =
                            std::mem::take(&mut listing);
                        flag.store(true, std::sync::atomic::Ordering::Release);
                    }
                    Ok(Event::Apply(o)) => shared
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(&value(&o)),
                    Ok(Event::Delete(o)) => shared
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(o.metadata.name.as_deref().unwrap_or_default()),
                    Err(error) => tracing::debug!(%error, "node watch error; backing off"),
                }
            }
        });
        NodeWatch { nodes, ready, task }
    }

    /// Whether the first list has completed.
    #[must_use]
    pub fn synced(&self) -> bool {
        self.ready.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The node labels now.
    #[must_use]
    pub fn snapshot(&self) -> NodeIndex {
        self.nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
