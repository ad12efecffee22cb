//! [`RunningPod`]: one pod as a controller keeps it between passes.

use super::read::{
    container_state, kept_annotations, non_disruptive, same_quantities, seconds, share,
    spec_container, str, view_texts, Mark,
};
use super::resize::{ResizeCondition, ResizeStatus};
use super::texts::Texts;
use crate::json::borrowed::JsonMap;
use crate::mutate::pod::{
    ContainerView, OwnerReference, PodMeta, PodSpecView, PodView, ResourcesView,
};
use crate::mutate::Originals;
use serde_json::Value;
use std::sync::Arc;

/// The label that makes a pod a balloon (KEP-5620).
pub const BALLOON_LABEL: &str = "node.kubernetes.io/balloon";

/// Why an object could not be kept as a pod; the message names the object
/// and the field.
#[derive(Debug, thiserror::Error)]
#[error("Pod {object}: {reason}")]
pub struct PodError {
    /// `namespace/name`, or what is known of it.
    pub object: String,
    /// What is wrong, naming the field.
    pub reason: String,
}

/// `status.phase`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PodPhase {
    /// Not yet running (or no phase written yet).
    #[default]
    Pending,
    /// Bound and started.
    Running,
    /// Finished, successfully or not, or unknown to the node.
    Done,
}

/// One container's state from `status.containerStatuses[]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerState {
    /// The container's name.
    pub name: Box<str>,
    /// `resources.requests` the kubelet reports as actuated, as texts;
    /// `None` when the status has no resources (then the spec is current).
    /// Shares the spec's list when the texts are the same.
    pub requests: Option<Texts>,
    /// `resources.limits` as actuated.
    pub limits: Option<Texts>,
    /// How long the container ran before its last OOM kill, in seconds.
    pub last_oom_after: Option<i64>,
}

/// One `spec.containers[]` entry: what the webhook's arithmetic reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecContainer {
    /// The container's name (shared with plans about it).
    pub name: Arc<str>,
    /// Whether the container has a `resources` field at all (a resize of
    /// one that has not must create it).
    pub has_resources: bool,
    /// `resources.requests`; `None` when absent.
    pub requests: Option<Texts>,
    /// `resources.limits`; `None` when absent.
    pub limits: Option<Texts>,
}

/// Annotation name to value.
pub(super) type Annotations = Box<[(Box<str>, Box<str>)]>;

/// One pod, reduced to what the updater and the balloon controller read.
///
/// The names are shared (`Arc`), so that a plan about the pod copies a
/// reference, not the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningPod {
    /// `metadata.namespace`.
    pub namespace: Arc<str>,
    /// `metadata.name`.
    pub name: Arc<str>,
    /// `metadata.uid`.
    pub uid: Arc<str>,
    /// `metadata.resourceVersion`, the precondition of every write.
    pub resource_version: Arc<str>,
    /// `spec.nodeName`; `None` while unbound.
    pub node: Option<Arc<str>>,
    /// The controlling apps/v1 DaemonSet's name.
    pub daemonset: Option<Box<str>>,
    /// Labelled `node.kubernetes.io/balloon: "true"`.
    pub balloon: bool,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// `status.phase`.
    pub phase: PodPhase,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// When the `Ready` condition last changed (its `lastTransitionTime`),
    /// in Unix seconds; `None` without one. The startup boost lasts from
    /// there (upstream `GetExpiredStartupCPUBoostAnnotations`).
    pub ready_since: Option<i64>,
    /// `status.startTime`, in Unix seconds.
    pub start_time: Option<i64>,
    /// Where a resize stands, from the pod's conditions.
    pub resize: ResizeStatus,
    /// Every container's resize policy allows a resize without a restart.
    pub non_disruptive_resize: bool,
    /// `status.containerStatuses[]`.
    pub containers: Box<[ContainerState]>,
    /// Some container's spec asks for other resources than the kubelet
    /// reports as actuated: a resize was accepted and is not done yet.
    pub awaiting_actuation: bool,
    /// `spec.containers[]`: names and resources.
    pub spec: Box<[SpecContainer]>,
    /// The annotations the arithmetic reads (the observed containers,
    /// upstream's startup-boost ones), when the pod has them.
    pub(super) annotations: Annotations,
    /// nodescope's mark (`nodescope.dev/original-resources`), read once
    /// rather than on every pass: `Ok(None)` without one, `Err` with the
    /// reason when it is not nodescope's JSON (the arithmetic then says so,
    /// as the webhook does). Not kept among `annotations`.
    pub(super) mark: Mark,
}

impl RunningPod {
    /// Reads a Pod object (as listed, watched or loaded from a file).
    ///
    /// # Errors
    /// When a field nodescope relies on is missing or of the wrong type.
    pub fn from_value(pod: &Value) -> Result<RunningPod, PodError> {
        let meta = pod.get("metadata").and_then(Value::as_object);
        let text = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
        let object = format!(
            "{}/{}",
            text("namespace").unwrap_or("<no namespace>"),
            text("name").unwrap_or("<no name>")
        );
        let fail = |reason: String| PodError {
            object: object.clone(),
            reason,
        };
        let (Some(meta), Some(name), Some(namespace)) = (meta, text("name"), text("namespace"))
        else {
            return Err(fail(
                "metadata.name and metadata.namespace are required".into(),
            ));
        };
        let spec = pod.get("spec").unwrap_or(&Value::Null);
        let status = pod.get("status").unwrap_or(&Value::Null);
        let containers = spec
            .get("containers")
            .and_then(Value::as_array)
            .ok_or_else(|| fail("spec.containers: expected an array".into()))?;
        let labels = meta.get("labels").and_then(Value::as_object);
        let controller = meta
            .get("ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| {
                refs.iter()
                    .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            });
        let daemonset = controller
            .filter(|r| {
                r.get("apiVersion").and_then(Value::as_str) == Some("apps/v1")
                    && r.get("kind").and_then(Value::as_str) == Some("DaemonSet")
            })
            .and_then(|r| r.get("name").and_then(Value::as_str))
            .map(Box::from);
        let (annotations, mark) = kept_annotations(meta).map_err(fail)?;
        let spec_containers = containers
            .iter()
            .enumerate()
            .map(|(i, c)| spec_container(c).map_err(|e| fail(format!("spec.containers[{i}].{e}"))))
            .collect::<Result<Box<[_]>, _>>()?;
        let start_time = match status.get("startTime").and_then(Value::as_str) {
            Some(t) => Some(seconds(t).map_err(|e| fail(format!("status.startTime: {e}")))?),
            None => None,
        };
        let conditions = status.get("conditions").and_then(Value::as_array);
        let condition = |kind: &str| {
            conditions
                .into_iter()
                .flatten()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        };
        let is_true = |c: Option<&Value>| {
            c.and_then(|c| c.get("status")).and_then(Value::as_str) == Some("True")
        };
        let words = |c: &Value, key: &str| {
            c.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let resize = ResizeStatus::of(
            condition("PodResizePending")
                .filter(|c| is_true(Some(c)))
                .map(|c| ResizeCondition {
                    reason: words(c, "reason"),
                    message: words(c, "message"),
                }),
            condition("PodResizeInProgress")
                .filter(|c| is_true(Some(c)))
                .map(|c| ResizeCondition {
                    reason: words(c, "reason"),
                    message: words(c, "message"),
                }),
        );
        let mut states = Vec::new();
        for (i, cs) in status
            .get("containerStatuses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            states.push(
                container_state(cs)
                    .map_err(|e| fail(format!("status.containerStatuses[{i}]: {e}")))?,
            );
        }
        let awaiting_actuation = actuation(&spec_containers, &mut states);
        Ok(RunningPod {
            awaiting_actuation,
            namespace: namespace.into(),
            name: name.into(),
            uid: text("uid").unwrap_or_default().into(),
            resource_version: text("resourceVersion").unwrap_or_default().into(),
            node: spec
                .get("nodeName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(Arc::from),
            daemonset,
            balloon: labels
                .and_then(|l| l.get(BALLOON_LABEL))
                .and_then(Value::as_str)
                == Some("true"),
            terminating: meta.get("deletionTimestamp").is_some_and(|t| !t.is_null()),
            phase: match status.get("phase").and_then(Value::as_str) {
                Some("Running") => PodPhase::Running,
                Some("Succeeded" | "Failed" | "Unknown") => PodPhase::Done,
                _ => PodPhase::Pending,
            },
            ready: is_true(condition("Ready")),
            ready_since: match condition("Ready")
                .and_then(|c| c.get("lastTransitionTime"))
                .and_then(Value::as_str)
            {
                Some(t) => Some(seconds(t).map_err(|e| {
                    fail(format!("status.conditions[Ready].lastTransitionTime: {e}"))
                })?),
                None => None,
            },
            start_time,
            resize,
            non_disruptive_resize: containers.iter().all(non_disruptive),
            containers: states.into_boxed_slice(),
            spec: spec_containers,
            annotations,
            mark,
        })
    }

    /// The pod as the webhook's arithmetic reads it, borrowed from what is
    /// kept: no parse, a few small vectors.
    #[must_use]
    pub fn view(&self) -> PodView<'_> {
        PodView {
            metadata: PodMeta {
                name: Some(str(&self.name)),
                generate_name: None,
                namespace: Some(str(&self.namespace)),
                labels: Some(JsonMap(if self.balloon {
                    vec![(str(BALLOON_LABEL), str("true"))]
                } else {
                    Vec::new()
                })),
                annotations: Some(JsonMap(
                    self.annotations
                        .iter()
                        .map(|(k, v)| (str(k), str(v)))
                        .collect(),
                )),
                owner_references: Some(
                    self.daemonset
                        .iter()
                        .map(|name| OwnerReference {
                            api_version: str("apps/v1"),
                            kind: str("DaemonSet"),
                            name: str(name),
                            controller: Some(true),
                        })
                        .collect(),
                ),
            },
            spec: PodSpecView {
                node_name: self.node.as_deref().map(str),
                affinity: None,
                containers: self
                    .spec
                    .iter()
                    .map(|c| ContainerView {
                        name: str(&c.name),
                        resources: c.has_resources.then(|| ResourcesView {
                            requests: view_texts(c.requests.as_ref()),
                            limits: view_texts(c.limits.as_ref()),
                        }),
                    })
                    .collect(),
            },
        }
    }

    /// `namespace/name`.
    #[must_use]
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The container's actuated state, if the status has one.
    #[must_use]
    pub fn container_state(&self, name: &str) -> Option<&ContainerState> {
        self.containers.iter().find(|c| &*c.name == name)
    }

    /// Whether the pod carries nodescope's mark (readable or not).
    #[must_use]
    pub fn has_mark(&self) -> bool {
        !matches!(self.mark, Ok(None))
    }

    /// nodescope's mark, as [`Originals::of`] reads it from the pod,
    /// without a parse.
    ///
    /// # Errors
    /// When the annotation was not nodescope's JSON, with the reason.
    pub fn originals(&self) -> Result<Option<Originals<'_>>, String> {
        match &self.mark {
            Ok(None) => Ok(None),
            Err(reason) => Err(reason.to_string()),
            Ok(Some(containers)) => Ok(Some(Originals::from_lists(containers.iter().map(|c| {
                (
                    &*c.name,
                    view_texts(c.requests.as_ref()),
                    view_texts(c.limits.as_ref()),
                )
            })))),
        }
    }

    /// The kept annotations, (key, value).
    pub fn annotations(&self) -> impl Iterator<Item = (&str, &str)> {
        self.annotations.iter().map(|(k, v)| (&**k, &**v))
    }

    /// The annotation `key`, if kept (see [`RunningPod::view`]).
    #[must_use]
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, v)| &**v)
    }
}

/// Points each container status's lists at its spec's when the texts are
/// the same (the pod holds one copy); whether some container's spec asks
/// for other resources than its status reports (a resize not actuated yet).
pub(super) fn actuation(spec: &[SpecContainer], states: &mut [ContainerState]) -> bool {
    for state in states.iter_mut() {
        if let Some(spec) = spec.iter().find(|c| *c.name == *state.name) {
            share(&mut state.requests, &spec.requests);
            share(&mut state.limits, &spec.limits);
        }
    }
    spec.iter().any(|c| {
        states.iter().find(|s| *s.name == *c.name).is_some_and(|s| {
            let differs = |spec: &Option<Texts>, actual: &Option<Texts>| {
                actual
                    .as_ref()
                    .is_some_and(|actual| !same_quantities(spec.as_ref(), actual))
            };
            differs(&c.requests, &s.requests) || differs(&c.limits, &s.limits)
        })
    })
}

#[cfg(test)]
#[path = "running_tests.rs"]
mod tests;
