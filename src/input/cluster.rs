//! An offline cluster as each controller's plan reads it: every object of
//! `--store file:PATH` kept in the compact form the in-cluster controller
//! keeps (pods as the updater's [`RunningPod`], or the balloon
//! controller's [`NodePod`]) the moment it is read. A JSON list's pods,
//! most of a dump, are read from their text ([`PodText`]) with no
//! `serde_json::Value` built for each.

use super::objects::{
    item_type, read_objects, read_typed_objects, untargeted_scoped_vpa, Key, Kinds, Typed,
};
use super::parse::{InputError, Location};
use crate::balloon::{BalloonNode, NodePod, PodIndex};
use crate::manifest::ListHead;
use crate::pods::{PodText, RunningPod};
use crate::recommend::input::{ScopedVpa, TrackedPod};
use crate::recommend::replay::Cluster;
use crate::selector::Labels;
use crate::store::{Entry, Interner, Snapshot};
use crate::update::workloads::DaemonSetInfo;
use crate::update::Workloads;
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;

/// Why an offline cluster cannot be planned on.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The input itself (a file, a syntax error, an object given twice).
    #[error(transparent)]
    Input(#[from] InputError),
    /// Objects that cannot be read, each naming itself, one a line.
    #[error("{}", .0.join("\n"))]
    Objects(Vec<String>),
    /// Nothing the command can use.
    #[error("{flag}: {found}; {expected}")]
    Nothing {
        flag: String,
        found: String,
        expected: &'static str,
    },
}

/// What the updater's plan reads.
pub struct UpdaterState {
    pub workloads: Workloads,
    pub snapshot: Snapshot,
    /// `namespace/name` of the pods `select` chose: the plan covers every
    /// pod (a DaemonSet's budget counts them all) and shows these; `None`
    /// shows every pod (no `select`: 100,000 keys not made for nothing).
    pub selected: Option<HashSet<String>>,
}

/// Chooses pods by namespace and labels (as `-n` and `-l` do).
pub type Select<'s> = &'s dyn Fn(&str, &dyn Labels) -> bool;

/// A Pod of a JSON list (of `apiVersion` `api`, when given) read from
/// its text, without a Value (most of a dump is pods; see [`PodText`]);
/// `None` leaves it to the Value read.
fn typed_pod<'t>(
    text: &'t str,
    head: &'t ListHead,
    api: Option<&str>,
) -> Option<(PodText<'t>, RunningPod, Option<Key>)> {
    let pod = PodText::parse(text)?;
    let (kind, api_version) = item_type(pod.kind(), pod.api_version(), head)?;
    if kind != "Pod" || api.is_some_and(|api| api != api_version) {
        return None;
    }
    let key = Key::new(api_version, kind, pod.namespace(), pod.name());
    let running = pod.running()?;
    Some((pod, running, key))
}

/// The namespace and labels of an object, for [`Select`].
fn select_value(select: Select<'_>, object: &Value) -> bool {
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    select(
        namespace,
        &object
            .pointer("/metadata/labels")
            .and_then(Value::as_object),
    )
}

/// The objects under `path` as the updater keeps them; `flag` is how
/// messages name the input (`--store file:DIR`), `select` chooses the
/// pods shown (as `-n` and `-l` do; `None`: all), `warn` hears of each scoped VPA
/// skipped, as it is read.
///
/// # Errors
/// Unreadable input, every Pod, DaemonSet or store object that cannot be
/// read, or no Pod at all (a plan of nothing would look like all clear).
pub fn updater_state(
    path: &Path,
    flag: &str,
    select: Option<Select<'_>>,
    warn: &mut dyn FnMut(&str),
) -> Result<UpdaterState, ClusterError> {
    enum Kept {
        Pod(RunningPod, bool),
        DaemonSet((String, String), DaemonSetInfo),
        Entry(Entry),
        Problem(String),
    }
    let mut interner = Interner::default();
    // Converting has no effect until `keep`: a file may be read twice.
    let convert = |object: Value, _: &Location| {
        let warning = untargeted_scoped_vpa(&object);
        let api = object.get("apiVersion").and_then(Value::as_str);
        let kept = match (api, object.get("kind").and_then(Value::as_str)) {
            (Some("v1"), Some("Pod")) => match RunningPod::from_value(&object) {
                Ok(pod) => Kept::Pod(pod, select.is_some_and(|s| select_value(s, &object))),
                Err(e) => Kept::Problem(e.to_string()),
            },
            (Some("apps/v1"), Some("DaemonSet")) => match DaemonSetInfo::from_value(&object) {
                Ok((key, ds)) => Kept::DaemonSet(key, ds),
                Err(e) => Kept::Problem(e),
            },
            _ => Kept::Entry(Entry::from_value(object, &mut interner)),
        };
        (warning, kept)
    };
    let typed = |text: &str, head: &ListHead| {
        let (pod, running, key) = typed_pod(text, head, Some("v1"))?;
        let chosen = select.is_some_and(|s| s(pod.namespace(), &pod));
        Some(Typed {
            kind: "Pod",
            key,
            converted: (None, Kept::Pod(running, chosen)),
        })
    };
    let mut workloads = Workloads::default();
    let (mut entries, mut problems) = (Vec::new(), Vec::new());
    let mut selected = select.map(|_| HashSet::new());
    let kinds = read_typed_objects(path, typed, convert, |(warning, kept)| {
        warning.iter().for_each(|w| warn(w));
        match kept {
            Kept::Pod(pod, chosen) => {
                if let Some(selected) = selected.as_mut().filter(|_| chosen) {
                    selected.insert(pod.key());
                }
                workloads.put_pod(pod);
            }
            Kept::DaemonSet(key, ds) => {
                workloads.daemonsets.insert(key, ds);
            }
            Kept::Entry(entry) => entries.push(entry),
            Kept::Problem(problem) => problems.push(problem),
        }
        Ok::<(), ClusterError>(())
    })?;
    if !problems.is_empty() {
        return Err(ClusterError::Objects(problems));
    }
    let snapshot = Snapshot::from_entries(&entries);
    if !snapshot.problems.is_empty() {
        let words = snapshot.problems.iter().map(ToString::to_string).collect();
        return Err(ClusterError::Objects(words));
    }
    if workloads.pods.is_empty() {
        return Err(nothing(
            flag,
            &kinds,
            "the plan is made for Pods (with their DaemonSets, VerticalPodAutoscalers, Nodes and LimitRanges)",
        ));
    }
    Ok(UpdaterState {
        workloads,
        snapshot,
        selected,
    })
}

/// The Nodes and Pods under `path` as the balloon controller keeps them:
/// Nodes as [`BalloonNode`]s, Pods reduced at once to the [`NodePod`]s
/// the controller's watch keeps (those that hold something on a node);
/// `select` chooses the Nodes kept (as `-l` does).
///
/// # Errors
/// Unreadable input, every Node or Pod that cannot be read, or no Node
/// (selected or not: a selector that matches none is an empty answer).
pub fn balloon_state(
    path: &Path,
    flag: &str,
    select: &dyn Fn(&Value) -> bool,
) -> Result<(Vec<BalloonNode>, PodIndex), ClusterError> {
    enum Kept {
        Node(BalloonNode, bool),
        Pod(Option<NodePod>),
        Other,
        Problem(String),
    }
    let convert = |object: Value, _: &Location| match object.get("kind").and_then(Value::as_str) {
        Some("Node") => BalloonNode::from_value(&object).map_or_else(
            |e| Kept::Problem(e.to_string()),
            |node| Kept::Node(node, select(&object)),
        ),
        Some("Pod") => RunningPod::from_value(&object).map_or_else(
            |e| Kept::Problem(e.to_string()),
            |pod| Kept::Pod(NodePod::of(&pod)),
        ),
        _ => Kept::Other,
    };
    let typed = |text: &str, head: &ListHead| {
        let (_, running, key) = typed_pod(text, head, None)?;
        Some(Typed {
            kind: "Pod",
            key,
            converted: Kept::Pod(NodePod::of(&running)),
        })
    };
    let (mut nodes, mut pods, mut problems) = (Vec::new(), PodIndex::default(), Vec::new());
    let mut any_node = false;
    let kinds = read_typed_objects(path, typed, convert, |kept| {
        match kept {
            Kept::Node(node, chosen) => {
                any_node = true;
                if chosen {
                    nodes.push(node);
                }
            }
            Kept::Pod(Some(pod)) => pods.put(pod),
            Kept::Pod(None) | Kept::Other => {}
            Kept::Problem(problem) => problems.push(problem),
        }
        Ok::<(), ClusterError>(())
    })?;
    if !problems.is_empty() {
        return Err(ClusterError::Objects(problems));
    }
    if !any_node {
        return Err(nothing(
            flag,
            &kinds,
            "the status is of Nodes (with the Pods on them)",
        ));
    }
    Ok((nodes, pods))
}

/// The VPAs, Pods and Nodes under `path` as the recommender reads them;
/// `warn` hears of each scoped VPA skipped.
///
/// # Errors
/// Unreadable input, a VPA or Pod that cannot be read (at its document), or
/// no VerticalPodAutoscaler with a scope and a DaemonSet target.
pub fn recommender_cluster(
    path: &Path,
    flag: &str,
    warn: &mut dyn FnMut(&str),
) -> Result<Cluster, ClusterError> {
    enum Kept {
        Vpa(Value, Option<ScopedVpa>),
        Pod(TrackedPod),
        Node(Value),
        Other,
    }
    let convert = |object: Value, location: &Location| {
        let at = |error: crate::recommend::input::InputError| {
            InputError::document(location, error.to_string())
        };
        let warning = untargeted_scoped_vpa(&object);
        let kept = match object.get("kind").and_then(Value::as_str) {
            Some("VerticalPodAutoscaler") => match ScopedVpa::from_value(&object) {
                Ok(scoped) => Ok(Kept::Vpa(object, scoped)),
                Err(e) => Err(at(e)),
            },
            Some("Pod") => match TrackedPod::from_value(&object) {
                Ok(pod) => Ok(pod.map_or(Kept::Other, Kept::Pod)),
                Err(e) => Err(at(e)),
            },
            Some("Node") => Ok(Kept::Node(object)),
            _ => Ok(Kept::Other),
        };
        (warning, kept)
    };
    let mut cluster = Cluster::default();
    let kinds = read_objects(path, convert, |(warning, kept)| {
        warning.iter().for_each(|w| warn(w));
        match kept? {
            Kept::Vpa(object, scoped) => cluster.vpas.push((object, scoped)),
            Kept::Pod(pod) => cluster.pods.push(pod),
            Kept::Node(node) => cluster.nodes.insert(&node),
            Kept::Other => {}
        }
        Ok::<(), ClusterError>(())
    })?;
    if !cluster.vpas.iter().any(|(_, scoped)| scoped.is_some()) {
        return Err(nothing(
            flag,
            &kinds,
            "recommendations are made for VerticalPodAutoscalers with a spec.scope and a DaemonSet spec.targetRef",
        ));
    }
    Ok(cluster)
}

/// The error for an input without what a command reads.
fn nothing(flag: &str, kinds: &Kinds, expected: &'static str) -> ClusterError {
    ClusterError::Nothing {
        flag: flag.to_owned(),
        found: kinds.found(),
        expected,
    }
}
