//! The simulated kubelet's pod side: start, resize, remove.
//!
//! - A pod bound to one of the Nodes becomes Running and Ready, with
//!   `containerStatuses` carrying `resources` and `allocatedResources`.
//! - A resize (spec requests that differ from `allocatedResources`) is
//!   judged as KEP-1287's kubelet judges it: the pod's new requests larger
//!   than the Node's allocatable can never fit (`PodResizePending`,
//!   `Infeasible`); larger than what the other pods leave is `Deferred` and
//!   retried as pods go; else it is allocated at once
//!   (`PodResizeInProgress`) and actuated after `delay` (the status
//!   `resources` follow, the condition goes). The delay makes a resize in
//!   flight visible to the updater and to the suite's ledger, as a real
//!   runtime's would be.
//! - A pod with a `deletionTimestamp` (an eviction, a preemption, a delete)
//!   is removed when that time comes, as the kubelet does after the grace
//!   period.

use super::nodes::Nodes;
use super::status;
use super::{bytes, milli};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::watcher;
use kube::Client;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What the kubelet did, counted.
#[derive(Default, Debug)]
pub struct KubeletCounts {
    pub started: AtomicUsize,
    pub resized: AtomicUsize,
    pub deferred: AtomicUsize,
    pub infeasible: AtomicUsize,
    pub removed: AtomicUsize,
}

type Key = (String, String);

pub(super) struct Shared {
    pub(super) client: Client,
    nodes: Nodes,
    pods: Mutex<HashMap<Key, Pod>>,
    /// Resizes allocated and not yet actuated: when they will be.
    actuating: Mutex<HashMap<Key, Instant>>,
    delay: Duration,
    counts: Arc<KubeletCounts>,
    /// Which pods are waiting and which are being worked on: one pod is
    /// handled by one worker at a time, as a kubelet's pod worker does.
    work: Mutex<WorkState>,
    queue: mpsc::UnboundedSender<Key>,
    /// Pods whose last write failed.
    retry: Mutex<HashSet<Key>>,
    /// Faults: nodes whose resizes are answered `Infeasible`, pods that
    /// were OOM-killed (faults.rs).
    pub(super) faults: super::faults::Faults,
}

/// A work queue's bookkeeping, as client-go's workqueue keeps it: a key
/// is queued once; a key that changes while a worker has it is marked
/// dirty and queued again when that worker is done, never handed to a
/// second worker.
#[derive(Default)]
struct WorkState {
    queued: HashSet<Key>,
    processing: HashSet<Key>,
    dirty: HashSet<Key>,
}

/// The running kubelet; its tasks stop when it is dropped.
pub struct Kubelet {
    pub counts: Arc<KubeletCounts>,
    pub(super) shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Kubelet {
    /// Watches every pod and acts for those bound to `nodes`.
    pub fn start(client: Client, nodes: Nodes, delay: Duration) -> Kubelet {
        let counts = Arc::new(KubeletCounts::default());
        let (queue, mut keys) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            client: client.clone(),
            nodes,
            pods: Mutex::default(),
            actuating: Mutex::default(),
            delay,
            counts: counts.clone(),
            work: Mutex::default(),
            queue,
            retry: Mutex::default(),
            faults: super::faults::Faults::default(),
        });
        let mut tasks = Vec::new();
        let watch = shared.clone();
        tasks.push(tokio::spawn(async move {
            let pods: Api<Pod> = Api::all(watch.client.clone());
            let config = watcher::Config::default().fields("spec.nodeName!=");
            let mut events = watcher::watcher(pods, config).boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                        let key = key(&pod);
                        if watch.cache(&key, pod) {
                            watch.enqueue(key);
                        }
                    }
                    Ok(watcher::Event::Delete(pod)) => {
                        let key = key(&pod);
                        lock(&watch.pods).remove(&key);
                        lock(&watch.actuating).remove(&key);
                        // Its room on the node is free: deferred resizes
                        // there may fit now.
                        watch.enqueue_node(pod.spec.and_then(|s| s.node_name).as_deref());
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        }));
        let tick = shared.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                tick.enqueue_due();
            }
        }));
        let work = shared.clone();
        tasks.push(tokio::spawn(async move {
            let stream = futures::stream::poll_fn(move |cx| keys.poll_recv(cx));
            stream
                .for_each_concurrent(24, |key| {
                    let work = work.clone();
                    async move {
                        if !work.take(&key) {
                            return;
                        }
                        work.reconcile(&key).await;
                        work.done(&key);
                    }
                })
                .await;
        }));
        Kubelet {
            counts,
            shared,
            tasks,
        }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(super) fn key(pod: &Pod) -> Key {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// cpu (millicores) and memory (bytes) of a resource list.
fn amounts(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> (i64, i64) {
    let get =
        |name: &str, f: fn(&str) -> i64| list.and_then(|l| l.get(name)).map_or(0, |q| f(&q.0));
    (get("cpu", milli), get("memory", bytes))
}

/// Per container: (name, spec requests, spec limits) as JSON.
pub(super) fn desired(pod: &Pod) -> Vec<(String, Value, Value)> {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| {
            let r = c.resources.as_ref();
            (
                c.name.clone(),
                json!(r.and_then(|r| r.requests.clone()).unwrap_or_default()),
                json!(r.and_then(|r| r.limits.clone()).unwrap_or_default()),
            )
        })
        .collect()
}

fn same(a: &Value, b: &Value) -> bool {
    let parse = |v: &Value| -> BTreeMap<String, i64> {
        v.as_object()
            .into_iter()
            .flatten()
            .map(|(k, q)| {
                let text = q.as_str().unwrap_or_default();
                let n = if k == "cpu" { milli(text) } else { bytes(text) };
                (k.clone(), n)
            })
            .collect()
    };
    parse(a) == parse(b)
}

/// A container's status as its spec asks: allocated and running with it.
fn as_spec(_: &str, requests: &Value, limits: &Value) -> (Value, Value) {
    (
        requests.clone(),
        json!({"requests": requests, "limits": limits}),
    )
}

/// The status a container has now: (allocated requests, resources).
pub(super) fn current(pod: &Pod, name: &str) -> Option<(Value, Value)> {
    let status = pod.status.as_ref()?;
    let cs = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == name)?;
    Some((
        json!(cs.allocated_resources.clone()?),
        serde_json::to_value(cs.resources.clone()?).ok()?,
    ))
}

fn pending_reason(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodResizePending" && c.status == "True")
        .and_then(|c| c.reason.clone())
}

/// The requests a pod holds on its node: what was allocated to it, or its
/// spec before it started.
fn held(pod: &Pod) -> (i64, i64) {
    let mut total = (0, 0);
    for (name, requests, _) in desired(pod) {
        let allocated = current(pod, &name).map_or(requests, |(a, _)| a);
        let list: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> =
            serde_json::from_value(allocated).unwrap_or_default();
        let (c, m) = amounts(Some(&list));
        total.0 += c;
        total.1 += m;
    }
    total
}

/// An etcd revision as a number, to order two versions of one pod (the
/// suite's apiserver is backed by etcd, whose resourceVersions are its
/// revisions); `None` when it is not one.
fn revision(pod: &Pod) -> Option<u64> {
    pod.metadata.resource_version.as_deref()?.parse().ok()
}

impl Shared {
    /// Keeps `pod` unless the cache has a newer version of it (a watch
    /// event can arrive after the response of our own later write);
    /// whether it was kept.
    fn cache(&self, key: &Key, pod: Pod) -> bool {
        let mut pods = lock(&self.pods);
        let older = pods
            .get(key)
            .and_then(revision)
            .zip(revision(&pod))
            .is_some_and(|(cached, new)| new < cached);
        if older {
            return false;
        }
        pods.insert(key.clone(), pod);
        true
    }

    fn enqueue(&self, key: Key) {
        let mut work = lock(&self.work);
        if work.processing.contains(&key) {
            work.dirty.insert(key);
        } else if work.queued.insert(key.clone()) {
            let _ = self.queue.send(key);
        }
    }

    /// Moves `key` from queued to processing; false when a worker has it
    /// already (it is then marked dirty, and handled again after).
    fn take(&self, key: &Key) -> bool {
        let mut work = lock(&self.work);
        work.queued.remove(key);
        if work.processing.contains(key) {
            work.dirty.insert(key.clone());
            return false;
        }
        work.processing.insert(key.clone());
        true
    }

    /// Ends a worker's hold on `key`; queues it again if it changed
    /// meanwhile.
    fn done(&self, key: &Key) {
        let again = {
            let mut work = lock(&self.work);
            work.processing.remove(key);
            work.dirty.remove(key)
        };
        if again {
            self.enqueue(key.clone());
        }
    }

    fn enqueue_node(&self, node: Option<&str>) {
        let Some(node) = node else { return };
        let keys: Vec<Key> = lock(&self.pods)
            .iter()
            .filter(|(_, p)| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .filter(|(_, p)| pending_reason(p).as_deref() == Some("Deferred"))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.enqueue(key);
        }
    }

    /// Pods whose time has come: deletions due, actuations due.
    fn enqueue_due(&self) {
        let now_ts = k8s_openapi::jiff::Timestamp::now();
        let mut due: Vec<Key> = lock(&self.pods)
            .iter()
            .filter(|(_, p)| {
                p.metadata
                    .deletion_timestamp
                    .as_ref()
                    .is_some_and(|t| t.0 <= now_ts)
            })
            .map(|(k, _)| k.clone())
            .collect();
        let now = Instant::now();
        due.extend(
            lock(&self.actuating)
                .iter()
                .filter(|(_, at)| **at <= now)
                .map(|(k, _)| k.clone()),
        );
        due.extend(lock(&self.retry).drain());
        for key in due {
            self.enqueue(key);
        }
    }

    async fn reconcile(&self, key: &Key) {
        let Some(pod) = lock(&self.pods).get(key).cloned() else {
            return;
        };
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            return;
        };
        let Some(shape) = self.nodes.get(&node) else {
            // Not one of ours yet (a joining Node's shape is known before
            // its object is created, but a bound pod may come from an
            // earlier run's Node): looked at again on the next tick.
            lock(&self.retry).insert(key.clone());
            return;
        };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
        if let Some(at) = &pod.metadata.deletion_timestamp {
            if at.0 <= k8s_openapi::jiff::Timestamp::now() {
                let params = DeleteParams {
                    grace_period_seconds: Some(0),
                    preconditions: Some(Preconditions {
                        uid: pod.metadata.uid.clone(),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                if api.delete(&key.1, &params).await.is_ok() {
                    self.counts.removed.fetch_add(1, Ordering::SeqCst);
                }
            }
            return;
        }
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            return;
        }
        let containers = desired(&pod);
        let started = phase == Some("Running")
            && containers
                .iter()
                .all(|(n, _, _)| current(&pod, n).is_some());
        if !started {
            let status = status::whole(&pod, &containers, as_spec, None);
            if self.write(&api, key, status).await {
                self.counts.started.fetch_add(1, Ordering::SeqCst);
            }
            return;
        }
        let unallocated = containers.iter().any(|(n, requests, _)| {
            current(&pod, n).is_some_and(|(allocated, _)| !same(&allocated, requests))
        });
        if unallocated {
            self.resize(&api, key, &pod, &containers, shape.cpu, shape.memory, &node)
                .await;
            return;
        }
        let unactuated = containers.iter().any(|(n, requests, limits)| {
            current(&pod, n).is_some_and(|(_, resources)| {
                !same(&resources["requests"], requests) || !same(&resources["limits"], limits)
            })
        });
        if unactuated {
            let due = *lock(&self.actuating)
                .entry(key.clone())
                .or_insert_with(|| Instant::now() + self.delay);
            if Instant::now() < due {
                return;
            }
            let status = status::whole(&pod, &containers, as_spec, None);
            if self.write(&api, key, status).await {
                lock(&self.actuating).remove(key);
                self.counts.resized.fetch_add(1, Ordering::SeqCst);
                // Less may be held now: deferred resizes on the node retry.
                self.enqueue_node(Some(&node));
            }
        } else if pending_reason(&pod).is_some() {
            // Asked for back what it has: nothing pending any more.
            let status = status::whole(&pod, &containers, as_spec, None);
            self.write(&api, key, status).await;
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn resize(
        &self,
        api: &Api<Pod>,
        key: &Key,
        pod: &Pod,
        containers: &[(String, Value, Value)],
        cpu: i64,
        memory: i64,
        node: &str,
    ) {
        let mut wanted = (0, 0);
        for (_, requests, _) in containers {
            let list = serde_json::from_value(requests.clone()).unwrap_or_default();
            let (c, m) = amounts(Some(&list));
            wanted.0 += c;
            wanted.1 += m;
        }
        let others = lock(&self.pods)
            .iter()
            .filter(|(k, p)| {
                *k != key && p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
            })
            .filter(|(_, p)| {
                !matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                )
            })
            .fold((0, 0), |acc, (_, p)| {
                let (c, m) = held(p);
                (acc.0 + c, acc.1 + m)
            });
        let keep = |name: &str, requests: &Value, limits: &Value| {
            current(pod, name).unwrap_or_else(|| {
                (
                    requests.clone(),
                    json!({"requests": requests, "limits": limits}),
                )
            })
        };
        let (reason, message) = if self.faults.infeasible(node, pod) {
            (
                "Infeasible",
                format!("Node didn't have enough capacity: the suite's fault on {node}"),
            )
        } else if wanted.0 > cpu || wanted.1 > memory {
            (
                "Infeasible",
                format!(
                    "Node didn't have enough capacity: requested cpu {}m memory {}, capacity cpu {cpu}m memory {memory}",
                    wanted.0, wanted.1
                ),
            )
        } else if others.0 + wanted.0 > cpu || others.1 + wanted.1 > memory {
            (
                "Deferred",
                format!(
                    "Node didn't have enough resource: requested cpu {}m memory {}, free cpu {}m memory {}",
                    wanted.0,
                    wanted.1,
                    cpu - others.0,
                    memory - others.1
                ),
            )
        } else {
            // Allocated now, actuated after the delay.
            let status = status::whole(
                pod,
                containers,
                |name, requests, limits| (requests.clone(), keep(name, requests, limits).1),
                Some(("PodResizeInProgress", "", "")),
            );
            if self.write(api, key, status).await {
                lock(&self.actuating).insert(key.clone(), Instant::now() + self.delay);
            }
            return;
        };
        if pending_reason(pod).as_deref() == Some(reason) {
            return;
        }
        let status = status::whole(
            pod,
            containers,
            |name, requests, limits| keep(name, requests, limits),
            Some(("PodResizePending", reason, &message)),
        );
        if self.write(api, key, status).await {
            let counter = if reason == "Deferred" {
                &self.counts.deferred
            } else {
                &self.counts.infeasible
            };
            counter.fetch_add(1, Ordering::SeqCst);
        }
    }

    pub(super) async fn write(&self, api: &Api<Pod>, key: &Key, mut status: Value) -> bool {
        self.faults.mark(key, &mut status);
        match api
            .patch_status(&key.1, &PatchParams::default(), &Patch::Merge(status))
            .await
        {
            Ok(pod) => {
                self.cache(key, pod);
                true
            }
            Err(kube::Error::Api(s)) if s.code == 404 => false,
            Err(e) => {
                // Tried again on the next tick from a fresh read, as a
                // kubelet's sync loop does, until it lands: through cut
                // connections and apiserver restarts alike.
                eprintln!(
                    "system: kubelet: status of {}/{} not written ({e}); retrying",
                    key.0, key.1
                );
                if let Ok(fresh) = api.get(&key.1).await {
                    self.cache(key, fresh);
                }
                lock(&self.retry).insert(key.clone());
                false
            }
        }
    }
}
