//! In-place resize (`pods/resize`, GA in Kubernetes 1.35): reading where a
//! resize stands from the pod's conditions, and asking for one.
//!
//! Both the updater and the balloon controller resize pods this way: the
//! request is a JSON patch of the `resize` subresource that first tests the
//! pod's resourceVersion, so a resize computed from a stale pod is refused
//! rather than applied over a newer one.

use crate::mutate::Patch;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PatchParams};
use kube::Client;

/// One `PodResizePending` or `PodResizeInProgress` condition that is `True`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResizeCondition {
    /// `reason`.
    pub reason: String,
    /// `message`.
    pub message: String,
}

/// Where a pod's last resize stands, as upstream's updater reads the
/// conditions (`getResizeStatus`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ResizeStatus {
    /// No resize is pending or in progress.
    #[default]
    None,
    /// `PodResizePending`, reason `Deferred`: the node may fit it later.
    Deferred(String),
    /// `PodResizePending`, reason `Infeasible`: the node cannot fit it.
    Infeasible(String),
    /// `PodResizeInProgress` with neither reason nor message.
    InProgress,
    /// `PodResizeInProgress`, reason `Error`.
    Error(String),
    /// A condition with a reason upstream does not know.
    Unknown(String),
}

impl ResizeStatus {
    /// From the pod's true `PodResizePending` and `PodResizeInProgress`
    /// conditions; pending wins, as upstream.
    #[must_use]
    pub fn of(pending: Option<ResizeCondition>, in_progress: Option<ResizeCondition>) -> Self {
        if let Some(c) = pending {
            return match c.reason.as_str() {
                "Deferred" => ResizeStatus::Deferred(c.message),
                "Infeasible" => ResizeStatus::Infeasible(c.message),
                _ => ResizeStatus::Unknown(c.reason),
            };
        }
        match in_progress {
            None => ResizeStatus::None,
            Some(c) if c.reason.is_empty() && c.message.is_empty() => ResizeStatus::InProgress,
            Some(c) if c.reason == "Error" => ResizeStatus::Error(c.message),
            Some(c) => ResizeStatus::Unknown(c.reason),
        }
    }

    /// Whether a resize is pending or in progress.
    #[must_use]
    pub fn is_updating(&self) -> bool {
        *self != ResizeStatus::None
    }
}

/// The `pods/resize` body: a test of `resource_version`, then `ops`.
#[must_use]
pub fn resize_patch(ops: &Patch, resource_version: &str) -> json_patch::Patch {
    resize_body(ops.operations(), resource_version)
}

/// The `pods/resize` body from operations built elsewhere: a test of
/// `resource_version`, then `operations`.
#[must_use]
pub fn resize_body(
    operations: Vec<json_patch::PatchOperation>,
    resource_version: &str,
) -> json_patch::Patch {
    let mut body = vec![json_patch::PatchOperation::Test(
        json_patch::TestOperation {
            path: json_patch::jsonptr::PointerBuf::parse("/metadata/resourceVersion")
                .unwrap_or_default(),
            value: serde_json::Value::String(resource_version.to_owned()),
        },
    )];
    body.extend(operations);
    json_patch::Patch(body)
}

/// Operations that set the given requests and limits of container `index`,
/// entry by entry (`add` replaces an existing entry). The maps themselves
/// must exist: set only the limits a container already has, which also
/// keeps its QoS class.
#[must_use]
pub fn container_resources_ops(
    index: usize,
    requests: &[(String, String)],
    limits: &[(String, String)],
) -> Vec<json_patch::PatchOperation> {
    let entry = |map: &str, (name, value): &(String, String)| {
        let mut path = json_patch::jsonptr::PointerBuf::new();
        for token in [
            "spec",
            "containers",
            &index.to_string(),
            "resources",
            map,
            name,
        ] {
            path.push_back(json_patch::jsonptr::Token::new(token));
        }
        json_patch::PatchOperation::Add(json_patch::AddOperation {
            path,
            value: serde_json::Value::String(value.clone()),
        })
    };
    requests
        .iter()
        .map(|e| entry("requests", e))
        .chain(limits.iter().map(|e| entry("limits", e)))
        .collect()
}

/// Why a resize request failed.
#[derive(Debug, thiserror::Error)]
pub enum ResizeError {
    /// The apiserver refused it because the node's allocatable cannot hold
    /// it (it checks before the kubelet sees it).
    #[error("resize of pod {pod} refused as infeasible: {message}")]
    Infeasible {
        /// `namespace/name`.
        pod: String,
        /// The apiserver's words.
        message: String,
    },
    /// The pod changed since it was read (the resourceVersion test failed),
    /// or it is gone.
    #[error("resize of pod {pod} not applied, the pod changed or is gone: {message}")]
    Stale {
        /// `namespace/name`.
        pod: String,
        /// The apiserver's words.
        message: String,
    },
    /// Anything else (RBAC, a policy, the network).
    #[error("resize of pod {pod} failed: {}", api_words(source))]
    Api {
        /// `namespace/name`.
        pod: String,
        /// The client error.
        source: kube::Error,
    },
}

/// The apiserver's reason and message of a client error, once each
/// (`kube::Error`'s own text repeats the message inside a debug dump of
/// the whole Status); the reason is empty when no Status came back.
#[must_use]
pub fn api_reason(error: &kube::Error) -> (String, String) {
    match error {
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() {
                status.code.to_string()
            } else {
                status.reason.clone()
            };
            (reason, status.message.clone())
        }
        other => (String::new(), other.to_string()),
    }
}

/// [`api_reason`] as one phrase: `NotFound: pods "x" not found`.
#[must_use]
pub fn api_words(error: &kube::Error) -> String {
    match api_reason(error) {
        (reason, message) if reason.is_empty() => message,
        (reason, message) => format!("{reason}: {message}"),
    }
}

impl ResizeError {
    /// The reason and the apiserver's message, for a log line's fields.
    #[must_use]
    pub fn reason(&self) -> (String, String) {
        match self {
            Self::Infeasible { message, .. } => ("Infeasible".to_owned(), message.clone()),
            Self::Stale { message, .. } => ("Stale".to_owned(), message.clone()),
            Self::Api { source, .. } => api_reason(source),
        }
    }

    /// The pod, `namespace/name`.
    #[must_use]
    pub fn pod(&self) -> &str {
        match self {
            Self::Infeasible { pod, .. } | Self::Stale { pod, .. } | Self::Api { pod, .. } => pod,
        }
    }
}

/// PATCHes `pods/resize` of `namespace/name` with `patch`.
///
/// # Errors
/// As [`ResizeError`] says.
pub async fn resize(
    client: &Client,
    namespace: &str,
    name: &str,
    patch: &json_patch::Patch,
) -> Result<(), ResizeError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = format!("{namespace}/{name}");
    match api
        .patch_subresource(
            "resize",
            name,
            &PatchParams::default(),
            &kube::api::Patch::<()>::Json(patch.clone()),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => {
            let message = status.message.clone();
            if message.contains("enough allocatable") || message.contains("Infeasible") {
                Err(ResizeError::Infeasible { pod, message })
            } else if crate::stale::is_stale(&status) {
                Err(ResizeError::Stale { pod, message })
            } else {
                Err(ResizeError::Api {
                    pod,
                    source: kube::Error::Api(status),
                })
            }
        }
        Err(source) => Err(ResizeError::Api { pod, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(reason: &str, message: &str) -> Option<ResizeCondition> {
        Some(ResizeCondition {
            reason: reason.into(),
            message: message.into(),
        })
    }

    #[test]
    fn conditions_read_as_upstream_reads_them() {
        assert_eq!(ResizeStatus::of(None, None), ResizeStatus::None);
        assert_eq!(
            ResizeStatus::of(c("Deferred", "later"), c("", "")),
            ResizeStatus::Deferred("later".into())
        );
        assert_eq!(
            ResizeStatus::of(c("Infeasible", "no"), None),
            ResizeStatus::Infeasible("no".into())
        );
        assert_eq!(
            ResizeStatus::of(c("Other", ""), None),
            ResizeStatus::Unknown("Other".into())
        );
        assert_eq!(ResizeStatus::of(None, c("", "")), ResizeStatus::InProgress);
        assert_eq!(
            ResizeStatus::of(None, c("Error", "boom")),
            ResizeStatus::Error("boom".into())
        );
        assert_eq!(
            ResizeStatus::of(None, c("Odd", "")),
            ResizeStatus::Unknown("Odd".into())
        );
    }

    #[test]
    fn container_resources_are_set_entry_by_entry_after_the_test() {
        let ops = container_resources_ops(
            0,
            &[("cpu".into(), "2".into()), ("memory".into(), "8Gi".into())],
            &[("cpu".into(), "2".into())],
        );
        let patch = resize_body(ops, "9");
        assert_eq!(
            serde_json::to_string(&patch).unwrap_or_default(),
            concat!(
                r#"[{"op":"test","path":"/metadata/resourceVersion","value":"9"},"#,
                r#"{"op":"add","path":"/spec/containers/0/resources/requests/cpu","value":"2"},"#,
                r#"{"op":"add","path":"/spec/containers/0/resources/requests/memory","value":"8Gi"},"#,
                r#"{"op":"add","path":"/spec/containers/0/resources/limits/cpu","value":"2"}]"#
            )
        );
    }

    #[test]
    fn the_patch_tests_the_resource_version_first() {
        let patch = resize_patch(&Patch::default(), "42");
        assert_eq!(
            serde_json::to_string(&patch).unwrap_or_default(),
            r#"[{"op":"test","path":"/metadata/resourceVersion","value":"42"}]"#
        );
    }
}
