//! What the balloon controller holds between passes, built at each watch
//! event: no Node or Pod object is kept past its event, and a pass reads
//! this state as it is (no store turned into JSON, no object parsed again).
//!
//! - A Node is kept as a [`BalloonNode`] (name, allocatable cpu and memory,
//!   the usable size asked for) and what the writes need of it: its UID
//!   (the Events' reference) and the state annotations the controller last
//!   wrote (a write that would change nothing is not sent).
//! - A Pod is kept as a [`NodePod`] while it is bound and not finished;
//!   [`super::pods`] says why each pod's own sum and age is kept rather than
//!   per-node sums.
//!
//! Each watch's relist (Init, InitApply, InitDone) builds a fresh map aside
//! and swaps it in at InitDone, so that an object deleted while the watch
//! was down does not linger. An object that cannot be read is left out
//! (and what was kept under its name forgotten), with a warning naming it
//! and why, through a [`Throttle`]: a relist of many bad objects writes a
//! burst of lines, not one per object.

use super::node::BalloonNode;
use super::pods::{NodePod, PodIndex};
use super::{REASON_ANNOTATION, STATE_ANNOTATION};
use crate::json::text::ObjectText;
use crate::pods::read_watched;
use crate::throttle::Throttle;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher::Event;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// What the Node holds now that the writes read: its UID (for Events) and
/// the state annotations the controller last wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `nodescope.dev/balloon-state`.
    pub state: Option<String>,
    /// `nodescope.dev/balloon-reason`.
    pub reason: Option<String>,
}

/// One Node as the controller keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchedNode {
    /// What the pass decides with.
    pub node: BalloonNode,
    /// What the writes read.
    pub written: Written,
}

/// The controller's state: every Node, the Pods that hold something on a
/// node, and whether each watch has listed once.
#[derive(Debug, Default)]
pub struct Watched {
    /// By name.
    pub nodes: HashMap<String, WatchedNode>,
    /// By node and by `namespace/name`.
    pub pods: PodIndex,
    /// Pods that could not be read, by `namespace/name`, with the node each
    /// is bound to: a pass leaves those nodes alone, since what else holds
    /// room on them is not known (fail closed: a balloon sized without a
    /// pod's requests could take that pod's room).
    pub unreadable: HashMap<String, String>,
    /// The Node watch has listed once.
    pub nodes_synced: bool,
    /// The Pod watch has listed once.
    pub pods_synced: bool,
}

impl Watched {
    /// The nodes a pass decides: every Node but those with a pod that
    /// could not be read.
    pub fn decidable(&self) -> impl Iterator<Item = &BalloonNode> {
        // Once a pass, not once a node: nodes x unreadable pods would grow
        // with both at 5,000 nodes.
        let held: std::collections::HashSet<&str> =
            self.unreadable.values().map(String::as_str).collect();
        self.nodes
            .values()
            .filter(move |n| !held.contains(n.node.name.as_str()))
            .map(|n| &n.node)
    }

    /// Both watches have listed once: a pass sees the whole cluster.
    #[must_use]
    pub fn synced(&self) -> bool {
        self.nodes_synced && self.pods_synced
    }
}

/// Locks the state. A panic while holding the lock leaves consistent data
/// (each event is applied whole), so a poisoned lock is taken as it is.
pub fn lock(state: &Mutex<Watched>) -> MutexGuard<'_, Watched> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads a Node's event down to what is kept.
///
/// # Errors
/// No name, or an allocatable that is not a quantity, in words naming the
/// Node and the field.
pub fn read_node(node: &Node) -> Result<(String, WatchedNode), String> {
    let read = BalloonNode::from_node(node).map_err(|e| e.to_string())?;
    let annotations = node.metadata.annotations.as_ref();
    let get = |key: &str| annotations.and_then(|a| a.get(key)).cloned();
    let written = Written {
        uid: node.metadata.uid.clone(),
        state: get(STATE_ANNOTATION),
        reason: get(REASON_ANNOTATION),
    };
    Ok((
        read.name.clone(),
        WatchedNode {
            node: read,
            written,
        },
    ))
}

/// Reads a Pod's event down to what is kept: `Ok(None)` when it holds
/// nothing on a node (unbound or finished).
///
/// # Errors
/// A field the pass relies on that is missing or of the wrong type, in
/// words naming the Pod and the field.
pub fn read_pod(pod: &ObjectText) -> Result<Option<NodePod>, String> {
    // The reading `balloon status` does of a file's Pod, so that both
    // decide alike, straight from the event's text.
    let pod = read_watched(pod, |_| true)?;
    Ok(pod.as_ref().and_then(NodePod::of))
}

/// `namespace/name`, as the state keys a pod.
#[must_use]
pub fn pod_key(pod: &ObjectText) -> String {
    format!("{}/{}", pod.namespace(), pod.name())
}

fn left_out(throttle: &Throttle, kind: &str, error: &str) {
    if let Some(suppressed) = throttle.admit() {
        tracing::warn!(
            kind,
            error,
            suppressed,
            "object left out of the balloon pass: it cannot be read"
        );
    }
}

/// The Node watch's side of the state: the relist being built.
#[derive(Debug, Default)]
pub struct NodeWatch {
    fresh: HashMap<String, WatchedNode>,
}

impl NodeWatch {
    /// Applies one event to `state`.
    pub fn on(&mut self, event: Event<Node>, state: &Mutex<Watched>, throttle: &Throttle) {
        match event {
            Event::Init => self.fresh = HashMap::new(),
            Event::InitApply(node) => match read_node(&node) {
                Ok((name, kept)) => {
                    self.fresh.insert(name, kept);
                }
                Err(error) => left_out(throttle, "Node", &error),
            },
            Event::InitDone => {
                let mut s = lock(state);
                s.nodes = std::mem::take(&mut self.fresh);
                s.nodes_synced = true;
            }
            Event::Apply(node) => match read_node(&node) {
                Ok((name, kept)) => {
                    lock(state).nodes.insert(name, kept);
                }
                Err(error) => {
                    if let Some(name) = &node.metadata.name {
                        lock(state).nodes.remove(name);
                    }
                    left_out(throttle, "Node", &error);
                }
            },
            Event::Delete(node) => {
                if let Some(name) = &node.metadata.name {
                    lock(state).nodes.remove(name);
                }
            }
        }
    }
}

/// The Pod watch's side of the state: the relist being built.
#[derive(Debug, Default)]
pub struct PodWatch {
    fresh: PodIndex,
    fresh_unreadable: HashMap<String, String>,
}

/// The node an unreadable pod is bound to (empty: none yet, so it holds
/// no node's room).
fn bound_to(pod: &ObjectText) -> String {
    #[derive(serde::Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Bound {
        spec: BoundSpec,
    }
    #[derive(serde::Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct BoundSpec {
        node_name: Option<String>,
    }
    serde_json::from_str::<Bound>(pod.text())
        .ok()
        .and_then(|b| b.spec.node_name)
        .unwrap_or_default()
}

impl PodWatch {
    /// Applies one event to `state`.
    pub fn on(&mut self, event: Event<ObjectText>, state: &Mutex<Watched>, throttle: &Throttle) {
        match event {
            Event::Init => {
                self.fresh = PodIndex::default();
                self.fresh_unreadable = HashMap::new();
            }
            Event::InitApply(pod) => match read_pod(&pod) {
                Ok(Some(kept)) => self.fresh.put(kept),
                Ok(None) => {}
                Err(error) => {
                    self.fresh_unreadable.insert(pod_key(&pod), bound_to(&pod));
                    left_out(throttle, "Pod", &error);
                }
            },
            Event::InitDone => {
                let mut s = lock(state);
                s.pods = std::mem::take(&mut self.fresh);
                s.unreadable = std::mem::take(&mut self.fresh_unreadable);
                s.pods_synced = true;
            }
            Event::Apply(pod) => match read_pod(&pod) {
                Ok(kept) => {
                    let mut s = lock(state);
                    s.unreadable.remove(&pod_key(&pod));
                    match kept {
                        Some(kept) => s.pods.put(kept),
                        None => s.pods.remove(&pod_key(&pod)),
                    }
                }
                Err(error) => {
                    let mut s = lock(state);
                    s.pods.remove(&pod_key(&pod));
                    s.unreadable.insert(pod_key(&pod), bound_to(&pod));
                    drop(s);
                    left_out(throttle, "Pod", &error);
                }
            },
            Event::Delete(pod) => {
                let mut s = lock(state);
                s.pods.remove(&pod_key(&pod));
                s.unreadable.remove(&pod_key(&pod));
            }
        }
    }
}
