//! A Pod read straight from its JSON text into [`RunningPod`], without a
//! `serde_json::Value` tree: the offline readers (`--store file:`) see
//! 100,000 pods of a dump, and building each pod's tree (every volume,
//! toleration and env entry) then dropping it was most of their time.
//!
//! [`RunningPod::from_value`] stays the one definition of what a pod is
//! read as, and of every error. This typed read takes only pods that read
//! cleanly: any field of a shape the Value read treats leniently or calls
//! an error (a number where a string is, a missing name, a bad time) makes
//! [`PodText::running`] give `None`, and the caller reads the pod as a
//! Value instead. So whenever this read answers, it answers what
//! `from_value` would (the tests compare both on every case they build).
//!
//! Structs take JSON objects only ([`crate::object_only!`]): serde's
//! derive would also take an array field by field, where the Value read
//! sees no object.

use super::read::{read_mark, seconds};
use super::resize::{ResizeCondition, ResizeStatus};
use super::running::{
    actuation, ContainerState, PodPhase, RunningPod, SpecContainer, BALLOON_LABEL,
};
use super::texts::Texts;
use crate::json::borrowed::{JsonMap, Str};
use crate::mutate::boost::STARTUP_CPU_BOOST_ANNOTATION_PREFIX;
use crate::mutate::mark::ORIGINAL_RESOURCES_ANNOTATION;
use crate::mutate::OBSERVED_CONTAINERS_ANNOTATION;
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use std::sync::Arc;

crate::object_only! {
    PodDoc<'a>, MetaDoc<'a>, OwnerDoc<'a>, SpecDoc<'a>, ContainerDoc<'a>, PolicyDoc<'a>,
    ResourcesDoc<'a>, StatusDoc<'a>, ConditionDoc<'a>, StatusContainerDoc<'a>,
    LastStateDoc<'a>, TerminatedDoc<'a>,
}

/// A string-to-string JSON object (a repeated key's last value wins, as in
/// a Value's map).
type Strings<'a> = JsonMap<Str<'a>, Str<'a>>;

/// `Some(None)` for `null`, `None` (by `default`) when absent: the Value
/// read tells the two apart for `kind` and `apiVersion`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<Str<'de>>>, D::Error> {
    Option::<Str<'de>>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct PodDoc<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    kind: Option<Option<Str<'a>>>,
    #[serde(borrow, default, deserialize_with = "present")]
    api_version: Option<Option<Str<'a>>>,
    #[serde(borrow, default)]
    metadata: Option<MetaDoc<'a>>,
    #[serde(borrow, default)]
    spec: Option<SpecDoc<'a>>,
    #[serde(borrow, default)]
    status: Option<StatusDoc<'a>>,
}

#[derive(Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct MetaDoc<'a> {
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    namespace: Option<Str<'a>>,
    #[serde(borrow, default)]
    uid: Option<Str<'a>>,
    #[serde(borrow, default)]
    resource_version: Option<Str<'a>>,
    #[serde(borrow, default)]
    labels: Option<Strings<'a>>,
    #[serde(borrow, default)]
    annotations: Option<Strings<'a>>,
    #[serde(borrow, default)]
    owner_references: Option<Vec<OwnerDoc<'a>>>,
    #[serde(default)]
    deletion_timestamp: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct OwnerDoc<'a> {
    #[serde(borrow, default)]
    api_version: Option<Str<'a>>,
    #[serde(borrow, default)]
    kind: Option<Str<'a>>,
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(default)]
    controller: Option<bool>,
}

#[derive(Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct SpecDoc<'a> {
    #[serde(borrow, default)]
    node_name: Option<Str<'a>>,
    #[serde(borrow, default)]
    containers: Option<Vec<ContainerDoc<'a>>>,
}

#[derive(Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct ContainerDoc<'a> {
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    resources: Option<ResourcesDoc<'a>>,
    #[serde(borrow, default)]
    resize_policy: Option<Vec<PolicyDoc<'a>>>,
}

#[derive(Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct PolicyDoc<'a> {
    #[serde(borrow, default)]
    restart_policy: Option<Str<'a>>,
}

#[derive(Deserialize)]
#[serde(remote = "Self")]
struct ResourcesDoc<'a> {
    #[serde(borrow, default)]
    requests: Option<Strings<'a>>,
    #[serde(borrow, default)]
    limits: Option<Strings<'a>>,
}

#[derive(Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct StatusDoc<'a> {
    #[serde(borrow, default)]
    phase: Option<Str<'a>>,
    #[serde(borrow, default)]
    start_time: Option<Str<'a>>,
    #[serde(borrow, default)]
    conditions: Option<Vec<ConditionDoc<'a>>>,
    #[serde(borrow, default)]
    container_statuses: Option<Vec<StatusContainerDoc<'a>>>,
}

#[derive(Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct ConditionDoc<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Str<'a>>,
    #[serde(borrow, default)]
    status: Option<Str<'a>>,
    #[serde(borrow, default)]
    reason: Option<Str<'a>>,
    #[serde(borrow, default)]
    message: Option<Str<'a>>,
    #[serde(borrow, default)]
    last_transition_time: Option<Str<'a>>,
}

#[derive(Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct StatusContainerDoc<'a> {
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    resources: Option<ResourcesDoc<'a>>,
    #[serde(borrow, default)]
    last_state: Option<LastStateDoc<'a>>,
}

#[derive(Deserialize)]
#[serde(remote = "Self")]
struct LastStateDoc<'a> {
    #[serde(borrow, default)]
    terminated: Option<TerminatedDoc<'a>>,
}

#[derive(Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct TerminatedDoc<'a> {
    #[serde(borrow, default)]
    reason: Option<Str<'a>>,
    #[serde(borrow, default)]
    started_at: Option<Str<'a>>,
    #[serde(borrow, default)]
    finished_at: Option<Str<'a>>,
}

/// A JSON object's text read as a Pod, borrowed from the text.
pub struct PodText<'a>(PodDoc<'a>);

impl<'a> PodText<'a> {
    /// Reads `text` (one JSON object); `None` when some field the pod
    /// reader reads is not of the usual shape (read it as a Value then).
    #[must_use]
    pub fn parse(text: &'a str) -> Option<PodText<'a>> {
        serde_json::from_str(text).ok().map(PodText)
    }

    /// `kind`: `None` when absent, `Some(None)` when `null`.
    #[must_use]
    pub fn kind(&self) -> Option<Option<&str>> {
        self.0.kind.as_ref().map(|k| k.as_deref())
    }

    /// `apiVersion`, as [`PodText::kind`].
    #[must_use]
    pub fn api_version(&self) -> Option<Option<&str>> {
        self.0.api_version.as_ref().map(|k| k.as_deref())
    }

    /// `metadata.namespace`, `""` when it has none.
    #[must_use]
    pub fn namespace(&self) -> &str {
        self.meta()
            .and_then(|m| m.namespace.as_deref())
            .unwrap_or_default()
    }

    /// `metadata.name`, `""` when it has none.
    #[must_use]
    pub fn name(&self) -> &str {
        self.meta()
            .and_then(|m| m.name.as_deref())
            .unwrap_or_default()
    }

    /// The label `key` (`metadata.labels`).
    #[must_use]
    pub fn label(&self, key: &str) -> Option<&str> {
        self.meta()?.labels.as_ref()?.get(key).map(|v| &**v)
    }

    /// The apps/v1 DaemonSet that controls the pod, as
    /// [`RunningPod::daemonset`] names it.
    #[must_use]
    pub fn daemonset(&self) -> Option<&str> {
        let controller = self
            .meta()?
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true))?;
        let daemonset = controller.api_version.as_deref() == Some("apps/v1")
            && controller.kind.as_deref() == Some("DaemonSet");
        controller.name.as_deref().filter(|_| daemonset)
    }

    fn meta(&self) -> Option<&MetaDoc<'a>> {
        self.0.metadata.as_ref()
    }

    /// The pod as [`RunningPod::from_value`] reads it; `None` where that
    /// read would fail, or might read otherwise than this one.
    #[must_use]
    pub fn running(&self) -> Option<RunningPod> {
        let meta = self.meta()?;
        let (name, namespace) = (meta.name.as_deref()?, meta.namespace.as_deref()?);
        let spec = self.0.spec.as_ref()?;
        let containers = spec.containers.as_ref()?;
        let daemonset = self.daemonset().map(Box::from);
        let (annotations, mark) = annotations(meta.annotations.as_ref())?;
        let spec_containers = containers
            .iter()
            .map(spec_container)
            .collect::<Option<Box<[_]>>>()?;
        let status = self.0.status.as_ref();
        let start_time = match status.and_then(|s| s.start_time.as_deref()) {
            Some(t) => Some(seconds(t).ok()?),
            None => None,
        };
        let conditions = status.and_then(|s| s.conditions.as_deref());
        let condition = |kind: &str| {
            conditions
                .into_iter()
                .flatten()
                .find(|c| c.kind.as_deref() == Some(kind))
        };
        let is_true = |c: &ConditionDoc<'_>| c.status.as_deref() == Some("True");
        let resize_condition = |kind: &str| {
            condition(kind).filter(|c| is_true(c)).map(|c| {
                let words = |w: &Option<Str<'_>>| w.as_deref().unwrap_or_default().to_owned();
                ResizeCondition {
                    reason: words(&c.reason),
                    message: words(&c.message),
                }
            })
        };
        let ready = condition("Ready");
        let ready_since = match ready.and_then(|c| c.last_transition_time.as_deref()) {
            Some(t) => Some(seconds(t).ok()?),
            None => None,
        };
        let mut states = status
            .and_then(|s| s.container_statuses.as_deref())
            .into_iter()
            .flatten()
            .map(container_state)
            .collect::<Option<Vec<_>>>()?;
        let awaiting_actuation = actuation(&spec_containers, &mut states);
        Some(RunningPod {
            awaiting_actuation,
            namespace: namespace.into(),
            name: name.into(),
            uid: meta.uid.as_deref().unwrap_or_default().into(),
            resource_version: meta.resource_version.as_deref().unwrap_or_default().into(),
            node: spec
                .node_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map(Arc::from),
            daemonset,
            balloon: self.label(BALLOON_LABEL) == Some("true"),
            terminating: meta.deletion_timestamp.is_some(),
            phase: match status.and_then(|s| s.phase.as_deref()) {
                Some("Running") => PodPhase::Running,
                Some("Succeeded" | "Failed" | "Unknown") => PodPhase::Done,
                _ => PodPhase::Pending,
            },
            ready: ready.is_some_and(is_true),
            ready_since,
            start_time,
            resize: ResizeStatus::of(
                resize_condition("PodResizePending"),
                resize_condition("PodResizeInProgress"),
            ),
            non_disruptive_resize: containers.iter().all(|c| {
                c.resize_policy
                    .iter()
                    .flatten()
                    .all(|p| p.restart_policy.as_deref() != Some("RestartContainer"))
            }),
            containers: states.into_boxed_slice(),
            spec: spec_containers,
            annotations,
            mark,
        })
    }
}

impl crate::selector::Labels for PodText<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        PodText::label(self, key)
    }
}

/// The annotations kept, as [`super::read::kept_annotations`] keeps them
/// from a Value's map: the observed containers, then upstream's
/// startup-boost ones in key order (a repeated key's last value).
fn annotations(
    annotations: Option<&Strings<'_>>,
) -> Option<(super::running::Annotations, super::read::Mark)> {
    let Some(annotations) = annotations else {
        return Some((Box::default(), Ok(None)));
    };
    let mut kept: Vec<(Box<str>, Box<str>)> = annotations
        .get(OBSERVED_CONTAINERS_ANNOTATION)
        .map(|v| (Box::from(OBSERVED_CONTAINERS_ANNOTATION), Box::from(&**v)))
        .into_iter()
        .collect();
    let mut boosts: Vec<&str> = annotations
        .iter()
        .map(|(k, _)| &**k)
        .filter(|k| k.starts_with(STARTUP_CPU_BOOST_ANNOTATION_PREFIX))
        .collect();
    boosts.sort_unstable();
    boosts.dedup();
    for key in boosts {
        let value = annotations.get(key)?;
        kept.push((Box::from(key), Box::from(&**value)));
    }
    let mark = match annotations.get(ORIGINAL_RESOURCES_ANNOTATION) {
        None => Ok(None),
        Some(text) => read_mark(text).map(Some).map_err(Box::from),
    };
    Some((kept.into_boxed_slice(), mark))
}

/// A resource list's texts, as `resource_texts` reads them.
fn texts(list: Option<&Strings<'_>>) -> Option<Option<Texts>> {
    match list {
        None => Some(None),
        Some(list) => Texts::try_from_pairs(list.iter().map(|(k, v)| (&**k, &**v)))
            .ok()
            .map(Some),
    }
}

fn spec_container(c: &ContainerDoc<'_>) -> Option<SpecContainer> {
    let resources = c.resources.as_ref();
    Some(SpecContainer {
        name: c.name.as_deref()?.into(),
        has_resources: resources.is_some(),
        requests: texts(resources.and_then(|r| r.requests.as_ref()))?,
        limits: texts(resources.and_then(|r| r.limits.as_ref()))?,
    })
}

fn container_state(cs: &StatusContainerDoc<'_>) -> Option<ContainerState> {
    let resources = cs.resources.as_ref();
    let terminated = cs.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let last_oom_after = match terminated {
        Some(t) if t.reason.as_deref() == Some("OOMKilled") => {
            let at = |time: &Option<Str<'_>>| time.as_deref().map(seconds).transpose().ok();
            match (at(&t.started_at)?, at(&t.finished_at)?) {
                (Some(start), Some(end)) => Some(end - start),
                _ => None,
            }
        }
        _ => None,
    };
    Some(ContainerState {
        name: cs.name.as_deref()?.into(),
        requests: texts(resources.and_then(|r| r.requests.as_ref()))?,
        limits: texts(resources.and_then(|r| r.limits.as_ref()))?,
        last_oom_after,
    })
}

#[cfg(test)]
#[path = "doc_tests.rs"]
mod tests;
