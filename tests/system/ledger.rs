//! What happened to the DaemonSets' pods, counted from a watch of its own
//! (not from nodescope's logs or metrics): pods created, resized (a change
//! of a live pod's spec resources), evicted or otherwise deleted (a
//! `deletionTimestamp` appearing), and the most pods of each DaemonSet
//! disrupted at once while measuring: not Ready, terminating, or with a
//! resize asked for and not yet actuated, as the updater's tolerance
//! counts them.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use kube::Client;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug, PartialEq)]
struct Seen {
    daemonset: String,
    resources: String,
    disrupted: bool,
    deleting: bool,
}

/// Counts per DaemonSet name.
#[derive(Default, Debug, Clone)]
pub struct Book {
    pods: HashMap<String, Seen>,
    now_disrupted: BTreeMap<String, usize>,
    pub created: BTreeMap<String, usize>,
    /// Each pod's first container's requests (cpu millicores, memory
    /// bytes) as it was created, by name.
    pub created_with: BTreeMap<String, (i64, i64)>,
    pub resized: BTreeMap<String, usize>,
    /// Resizes per pod name.
    pub resized_pods: BTreeMap<String, usize>,
    pub deleted: BTreeMap<String, usize>,
    /// Pods that got a deletionTimestamp, by name.
    pub deleted_pods: Vec<String>,
    pub max_disrupted: BTreeMap<String, usize>,
    pub measuring: bool,
}

impl Book {
    pub fn count(map: &BTreeMap<String, usize>, ds: &str) -> usize {
        map.get(ds).copied().unwrap_or(0)
    }
}

pub struct Ledger {
    book: Arc<Mutex<Book>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn seen(pod: &Pod, daemonset: String) -> Seen {
    let spec = pod.spec.as_ref();
    let resources: Vec<String> = spec
        .into_iter()
        .flat_map(|s| &s.containers)
        .map(|c| serde_json::to_string(&c.resources).unwrap_or_default())
        .collect();
    let status = pod.status.as_ref();
    let condition = |kind: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == kind && c.status == "True")
    };
    let awaiting = spec.into_iter().flat_map(|s| &s.containers).any(|c| {
        let requests = c.resources.as_ref().and_then(|r| r.requests.clone());
        let actual = status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.iter().find(|cs| cs.name == c.name))
            .and_then(|cs| cs.resources.as_ref())
            .and_then(|r| r.requests.clone());
        actual.is_some() && actual != requests
    });
    let deleting = pod.metadata.deletion_timestamp.is_some();
    Seen {
        daemonset,
        resources: resources.join(","),
        disrupted: deleting
            || !condition("Ready")
            || condition("PodResizePending")
            || condition("PodResizeInProgress")
            || awaiting,
        deleting,
    }
}

impl Ledger {
    /// Watches the pods of `namespaces`.
    pub async fn start(client: &Client, namespaces: &[&str]) -> Ledger {
        let book = Arc::new(Mutex::new(Book::default()));
        let mut streams = Vec::new();
        for ns in namespaces {
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            streams.push(watcher::watcher(api, watcher::Config::default()).boxed());
        }
        let mut events = futures::stream::select_all(streams);
        let (ready, is_ready) = tokio::sync::oneshot::channel();
        let shared = book.clone();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready);
            let mut synced = 0;
            let total = events.len();
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                        lock(&shared).apply(&pod);
                    }
                    Ok(watcher::Event::Delete(pod)) => lock(&shared).forget(&pod),
                    Ok(watcher::Event::InitDone) => {
                        synced += 1;
                        if synced == total {
                            if let Some(ready) = ready.take() {
                                let _ = ready.send(());
                            }
                        }
                    }
                    Ok(watcher::Event::Init) => {}
                    // The apiserver is away (fault 5): the watcher lists
                    // again on the next poll.
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
                }
            }
        });
        let _ = is_ready.await;
        Ledger { book, task }
    }

    pub fn book(&self) -> Book {
        lock(&self.book).clone()
    }

    /// Starts (or stops) recording the most pods disrupted at once, from
    /// the state now.
    pub fn measure(&self, on: bool) {
        let mut book = lock(&self.book);
        book.measuring = on;
        book.max_disrupted = book.now_disrupted.clone();
    }

    /// Forgets the counts (not the pods): a new phase starts.
    pub fn reset(&self) {
        let mut book = lock(&self.book);
        book.created.clear();
        book.created_with.clear();
        book.resized.clear();
        book.resized_pods.clear();
        book.deleted.clear();
        book.deleted_pods.clear();
    }
}

fn lock(book: &Mutex<Book>) -> std::sync::MutexGuard<'_, Book> {
    book.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Book {
    fn apply(&mut self, pod: &Pod) {
        let ds = crate::workloads::daemonset_of(pod);
        if ds.is_empty() {
            return;
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let now = seen(pod, ds.clone());
        let before = self.pods.insert(uid, now.clone());
        match &before {
            None => {
                *self.created.entry(ds.clone()).or_default() += 1;
                let requests = crate::workloads::pod_resources(pod)[0];
                self.created_with.insert(name.clone(), requests);
            }
            Some(old) => {
                if old.resources != now.resources && !now.deleting {
                    *self.resized.entry(ds.clone()).or_default() += 1;
                    *self.resized_pods.entry(name.clone()).or_default() += 1;
                }
            }
        }
        if now.deleting && !before.as_ref().is_some_and(|b| b.deleting) {
            *self.deleted.entry(ds.clone()).or_default() += 1;
            self.deleted_pods.push(name);
        }
        let was = before.as_ref().is_some_and(|b| b.disrupted);
        if was != now.disrupted {
            let count = self.now_disrupted.entry(ds.clone()).or_default();
            if now.disrupted {
                *count += 1;
            } else {
                *count = count.saturating_sub(1);
            }
        }
        self.track(&ds);
    }

    fn forget(&mut self, pod: &Pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if let Some(old) = self.pods.remove(&uid) {
            if old.disrupted {
                let count = self.now_disrupted.entry(old.daemonset.clone()).or_default();
                *count = count.saturating_sub(1);
            }
            // A pod that vanishes is disrupted until its replacement runs:
            // the replacement, not Ready at first, counts from its creation.
        }
    }

    fn track(&mut self, ds: &str) {
        if self.measuring {
            let now = self.now_disrupted.get(ds).copied().unwrap_or(0);
            let max = self.max_disrupted.entry(ds.to_owned()).or_default();
            *max = (*max).max(now);
        }
    }
}
