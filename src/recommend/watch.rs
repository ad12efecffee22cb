//! The recommender's view of pods and nodes, kept by watches so an interval
//! only reads memory: pods of the namespaces that have scoped VPAs, applied
//! straight to the model (owner, node, memory requests, OOM kills: one copy
//! of each pod), and node labels (metadata only).
//!
//! Pods are watched per namespace, not cluster-wide: the recommender needs
//! DaemonSet pods of a few namespaces, and its RBAC does not read
//! DaemonSets, so it cannot select their pods by label; the owner is checked
//! on each pod instead.

use super::input::{NodeIndex, TrackedPod};
use super::model::History;
use crate::json::text::ObjectText;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::discovery::ApiResource;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::task::JoinHandle;

/// The model the pod watches write into.
pub type Shared = Arc<Mutex<History>>;

/// Locks the model; a panic elsewhere while it was held does not make it
/// unusable (every update leaves it consistent).
pub fn lock(history: &Shared) -> std::sync::MutexGuard<'_, History> {
    history.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One pod watch per namespace that has scoped VPAs, each applying its
/// events to the model ([`History::upsert_pod`], [`History::remove_pod`]).
pub struct PodWatches {
    history: Shared,
    /// A namespace's watch, and whether its first list has completed.
    tasks: BTreeMap<String, (JoinHandle<()>, Arc<AtomicBool>)>,
}

/// The pod an event carries, read from its text: a page of the watch holds
/// pods as text, and no pod's whole tree is ever built.
fn tracked(object: &ObjectText) -> Option<TrackedPod> {
    let reference = format!("Pod/{}/{}", object.namespace(), object.name());
    match TrackedPod::from_text(object.text(), &reference) {
        Ok(pod) => pod,
        Err(error) => {
            tracing::warn!(%error, "pod left out");
            None
        }
    }
}

impl PodWatches {
    /// No watches yet; they will write into `history`.
    #[must_use]
    pub fn new(history: Shared) -> Self {
        PodWatches {
            history,
            tasks: BTreeMap::new(),
        }
    }

    /// Watches exactly `namespaces` from now on; the pods of a namespace no
    /// longer watched are forgotten.
    pub fn watch(&mut self, client: &Client, namespaces: &[&str]) {
        let before = self.tasks.len();
        self.tasks.retain(|ns, (task, _)| {
            let keep = namespaces.contains(&ns.as_str());
            if !keep {
                task.abort();
            }
            keep
        });
        if self.tasks.len() != before {
            lock(&self.history).retain_pods(|ns, _| namespaces.contains(&ns));
        }
        for ns in namespaces {
            if self.tasks.contains_key(*ns) {
                continue;
            }
            let ready = Arc::new(AtomicBool::new(false));
            let task = spawn_pods(client, ns, Arc::clone(&self.history), Arc::clone(&ready));
            self.tasks.insert((*ns).to_owned(), (task, ready));
        }
    }

    /// Whether every watched namespace has been listed once.
    #[must_use]
    pub fn synced(&self) -> bool {
        self.tasks
            .values()
            .all(|(_, ready)| ready.load(Ordering::Acquire))
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
    history: Shared,
    ready: Arc<AtomicBool>,
) -> JoinHandle<()> {
    let api: Api<ObjectText> =
        Api::namespaced_with(client.clone(), namespace, &ApiResource::erase::<Pod>(&()));
    let namespace = namespace.to_owned();
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        // Names seen by a (re)list, to drop the pods deleted meanwhile.
        let mut listed: HashSet<String> = HashSet::new();
        while let Some(event) = events.next().await {
            let name = |o: &ObjectText| o.name().to_owned();
            match event {
                Ok(Event::Init) => listed.clear(),
                Ok(Event::InitApply(o)) => {
                    if let Some(p) = tracked(&o) {
                        lock(&history).upsert_pod(&p);
                        listed.insert(name(&o));
                    }
                }
                Ok(Event::InitDone) => {
                    lock(&history).retain_pods(|ns, n| ns != namespace || listed.contains(n));
                    listed.clear();
                    ready.store(true, Ordering::Release);
                }
                Ok(Event::Apply(o)) => {
                    let mut h = lock(&history);
                    match tracked(&o) {
                        Some(p) => h.upsert_pod(&p),
                        None => h.remove_pod(&namespace, &name(&o)),
                    }
                }
                Ok(Event::Delete(o)) => lock(&history).remove_pod(&namespace, &name(&o)),
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
    ready: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl NodeWatch {
    /// Starts the watch.
    #[must_use]
    pub fn start(client: &Client) -> Self {
        let nodes = Arc::new(Mutex::new(NodeIndex::default()));
        let ready = Arc::new(AtomicBool::new(false));
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
                        flag.store(true, Ordering::Release);
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
        self.ready.load(Ordering::Acquire)
    }

    /// The node labels now, read in place (the watch waits meanwhile):
    /// an interval reads them once, with no copy of every node's labels.
    pub fn labels(&self) -> std::sync::MutexGuard<'_, NodeIndex> {
        self.nodes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
