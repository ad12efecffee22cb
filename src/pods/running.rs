//! [`RunningPod`]: one pod as a controller keeps it between passes.

use super::resize::{ResizeCondition, ResizeStatus};
use crate::mutate::mark::ORIGINAL_RESOURCES_ANNOTATION;
use crate::mutate::pod::{PodView, PodViewError};
use crate::mutate::OBSERVED_CONTAINERS_ANNOTATION;
use crate::quantity::Quantity;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Map, Value};

/// Resource name to quantity text, as a pod or template lists them.
pub type Texts = Vec<(Box<str>, Box<str>)>;

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
    pub requests: Option<Texts>,
    /// `resources.limits` as actuated.
    pub limits: Option<Texts>,
    /// How long the container ran before its last OOM kill, in seconds.
    pub last_oom_after: Option<i64>,
}

/// One pod, reduced to what the updater and the balloon controller read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningPod {
    /// `metadata.namespace`.
    pub namespace: Box<str>,
    /// `metadata.name`.
    pub name: Box<str>,
    /// `metadata.uid`.
    pub uid: Box<str>,
    /// `metadata.resourceVersion`, the precondition of every write.
    pub resource_version: Box<str>,
    /// `spec.nodeName`; `None` while unbound.
    pub node: Option<Box<str>>,
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
    /// `status.startTime`, in Unix seconds.
    pub start_time: Option<i64>,
    /// Where a resize stands, from the pod's conditions.
    pub resize: ResizeStatus,
    /// Every container's resize policy allows a resize without a restart.
    pub non_disruptive_resize: bool,
    /// `status.containerStatuses[]`.
    pub containers: Vec<ContainerState>,
    /// Some container's spec asks for other resources than the kubelet
    /// reports as actuated: a resize was accepted and is not done yet.
    pub awaiting_actuation: bool,
    /// The fields [`PodView`] reads, as JSON: the names, the controller
    /// reference, the labels and annotations nodescope reads, and each
    /// container's name and resources.
    view: Box<str>,
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
        let annotations = meta.get("annotations").and_then(Value::as_object);
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
        let view = view_json(meta, name, namespace, labels, annotations, controller, spec);
        // The view is parsed once here so that a pod nodescope cannot read
        // is refused now, with its field, and never later in a pass.
        if let Err(PodViewError::Json(reason)) = PodView::from_json(view.as_bytes()) {
            // The position is in nodescope's own reduced copy: only the
            // field path means something to the reader.
            let reason = reason.split(" at line ").next().unwrap_or_default();
            return Err(fail(reason.to_owned()));
        }
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
        let awaiting_actuation = containers.iter().any(|c| {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            states.iter().find(|s| &*s.name == name).is_some_and(|s| {
                let differs = |field: &str, actual: &Option<Texts>| {
                    actual.as_ref().is_some_and(|actual| {
                        let spec = c.pointer(&format!("/resources/{field}"));
                        !same_quantities(spec, actual)
                    })
                };
                differs("requests", &s.requests) || differs("limits", &s.limits)
            })
        });
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
                .map(Box::from),
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
            start_time,
            resize,
            non_disruptive_resize: containers.iter().all(non_disruptive),
            containers: states,
            view: view.into_boxed_str(),
        })
    }

    /// The pod as the webhook's arithmetic reads it. Checked when the pod
    /// was read, so it cannot fail.
    #[must_use]
    pub fn view(&self) -> PodView<'_> {
        PodView::from_json(self.view.as_bytes()).unwrap_or_default()
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
}

/// The JSON [`RunningPod::view`] parses: only what the arithmetic reads.
fn view_json(
    meta: &Map<String, Value>,
    name: &str,
    namespace: &str,
    labels: Option<&Map<String, Value>>,
    annotations: Option<&Map<String, Value>>,
    controller: Option<&Value>,
    spec: &Value,
) -> String {
    let keep = |map: Option<&Map<String, Value>>, keys: &[&str]| -> Value {
        let kept: Map<String, Value> = keys
            .iter()
            .filter_map(|k| Some(((*k).to_owned(), map?.get(*k)?.clone())))
            .collect();
        Value::Object(kept)
    };
    let containers: Vec<Value> = spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let mut kept = Map::new();
            for key in ["name", "resources"] {
                if let Some(v) = c.get(key) {
                    kept.insert(key.to_owned(), v.clone());
                }
            }
            Value::Object(kept)
        })
        .collect();
    let _ = meta;
    json!({
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": keep(labels, &[BALLOON_LABEL]),
            "annotations": keep(annotations, &[ORIGINAL_RESOURCES_ANNOTATION, OBSERVED_CONTAINERS_ANNOTATION]),
            "ownerReferences": controller.map(|c| vec![c.clone()]).unwrap_or_default(),
        },
        "spec": {
            "nodeName": spec.get("nodeName").cloned().unwrap_or(Value::Null),
            "containers": containers,
        },
    })
    .to_string()
}

/// Whether a container's `resizePolicy` lets cpu and memory change without
/// a restart (`NotRequired`, the default).
fn non_disruptive(container: &Value) -> bool {
    container
        .get("resizePolicy")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|p| p.get("restartPolicy").and_then(Value::as_str) != Some("RestartContainer"))
}

/// Whether a spec's resource map holds the same quantities as `actual`
/// (`1` and `1000m` are the same CPU).
fn same_quantities(spec: Option<&Value>, actual: &Texts) -> bool {
    let spec = spec.and_then(Value::as_object);
    let len = spec.map_or(0, Map::len);
    len == actual.len()
        && actual.iter().all(|(k, v)| {
            let want = spec.and_then(|m| m.get(&**k)).and_then(|q| match q {
                Value::String(s) => Quantity::parse(s).ok(),
                Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
                _ => None,
            });
            want.is_some() && want == Quantity::parse(v).ok()
        })
}

fn seconds(text: &str) -> Result<i64, String> {
    text.parse::<Timestamp>()
        .map(|t| t.as_second())
        .map_err(|e| format!("{text:?} is not an RFC 3339 time: {e}"))
}

/// `resources.<field>` as texts; `None` when absent.
///
/// # Errors
/// When it is not a map of quantities, naming the entry.
pub fn resource_texts(list: Option<&Value>, field: &str) -> Result<Option<Texts>, String> {
    let Some(list) = list else { return Ok(None) };
    let map = list
        .as_object()
        .ok_or_else(|| format!("resources.{field}: expected an object"))?;
    map.iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.as_str().into(), s.as_str().into())),
            Value::Number(n) => Ok((k.as_str().into(), n.to_string().into())),
            _ => Err(format!("resources.{field}.{k}: expected a quantity")),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn container_state(cs: &Value) -> Result<ContainerState, String> {
    let name = cs
        .get("name")
        .and_then(Value::as_str)
        .ok_or("name: expected a string")?;
    let resources = cs.get("resources");
    let terminated = cs.pointer("/lastState/terminated");
    let last_oom_after = match terminated {
        Some(t) if t.get("reason").and_then(Value::as_str) == Some("OOMKilled") => {
            let at = |key: &str| -> Result<Option<i64>, String> {
                t.get(key)
                    .and_then(Value::as_str)
                    .map(seconds)
                    .transpose()
                    .map_err(|e| format!("lastState.terminated.{key}: {e}"))
            };
            match (at("startedAt")?, at("finishedAt")?) {
                (Some(start), Some(end)) => Some(end - start),
                _ => None,
            }
        }
        _ => None,
    };
    Ok(ContainerState {
        name: name.into(),
        requests: resource_texts(resources.and_then(|r| r.get("requests")), "requests")?,
        limits: resource_texts(resources.and_then(|r| r.get("limits")), "limits")?,
        last_oom_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: Value) -> Value {
        json!({
            "metadata": {
                "name": "agent-x", "namespace": "monitoring", "uid": "u1", "resourceVersion": "7",
                "labels": {"app": "agent"},
                "annotations": {"vpaObservedContainers": "agent", "other": "dropped"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": true, "uid": "d1"}],
            },
            "spec": {
                "nodeName": "node-a",
                "containers": [{"name": "agent", "image": "x", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}],
            },
            "status": status,
        })
    }

    #[test]
    fn keeps_what_decisions_read() {
        let p = RunningPod::from_value(&pod(json!({
            "phase": "Running",
            "startTime": "2026-11-25T10:00:00Z",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "PodResizePending", "status": "True", "reason": "Infeasible", "message": "too big"},
            ],
            "containerStatuses": [{
                "name": "agent",
                "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "startedAt": "2026-11-25T10:00:00Z", "finishedAt": "2026-11-25T10:01:40Z"}},
            }],
        })))
        .expect("pod");
        assert_eq!(&*p.name, "agent-x");
        assert_eq!(p.node.as_deref(), Some("node-a"));
        assert_eq!(p.daemonset.as_deref(), Some("agent"));
        assert_eq!(p.phase, PodPhase::Running);
        assert!(p.ready);
        assert_eq!(p.start_time, Some(1_795_600_800));
        assert_eq!(p.resize, ResizeStatus::Infeasible("too big".into()));
        assert_eq!(p.containers[0].last_oom_after, Some(100));
        let view = p.view();
        assert_eq!(view.annotation("vpaObservedContainers"), Some("agent"));
        assert_eq!(view.annotation("other"), None);
        assert_eq!(view.daemonset_controller(), Some("agent"));
        assert_eq!(
            view.spec.containers[0]
                .requests()
                .and_then(|r| r.get("cpu"))
                .map(|q| &*q.0),
            Some("100m")
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let mut bad = pod(json!({"startTime": "yesterday"}));
        let e = RunningPod::from_value(&bad).expect_err("bad time");
        assert_eq!(
            e.to_string(),
            "Pod monitoring/agent-x: status.startTime: \"yesterday\" is not an RFC 3339 time: \
             failed to parse four digit integer as year: invalid digit, expected 0-9 but got y"
        );
        bad["status"] = json!({});
        bad["spec"]["containers"][0]["resources"]["requests"] = json!(["1"]);
        let e = RunningPod::from_value(&bad).expect_err("bad resources");
        assert_eq!(
            e.to_string(),
            "Pod monitoring/agent-x: spec.containers[0].resources.requests: invalid type: array, expected an object"
        );
        let e = RunningPod::from_value(&json!({"metadata": {"name": "x"}})).expect_err("no ns");
        assert_eq!(
            e.to_string(),
            "Pod <no namespace>/x: metadata.name and metadata.namespace are required"
        );
    }
}
