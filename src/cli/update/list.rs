//! What `update --plan` reads from the cluster: one listing of every kind
//! a pass reads, and whether the webhook is fresh enough to evict, so that
//! the plan is the pass the running updater would make.

use crate::cli::kubectl::cluster::{ClusterError, Connection};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::Client;
use serde_json::Value;
use std::time::Duration;

/// (group, version, kind, plural, required): what `--plan` lists. A kind
/// that is not required may be absent from the cluster (no Feature CRD).
const KINDS: [(&str, &str, &str, &str, bool); 7] = [
    (
        "autoscaling.k8s.io",
        "v1",
        "VerticalPodAutoscaler",
        "verticalpodautoscalers",
        true,
    ),
    ("", "v1", "LimitRange", "limitranges", true),
    ("", "v1", "Namespace", "namespaces", true),
    ("", "v1", "Node", "nodes", true),
    (
        "featureflags.nodescope.dev",
        "v1alpha1",
        "Feature",
        "features",
        false,
    ),
    ("", "v1", "Pod", "pods", true),
    ("apps", "v1", "DaemonSet", "daemonsets", true),
];

/// The kinds a pass reads only in the namespace of the VPAs it handles.
const IN_VPA_NAMESPACE: [&str; 4] = ["VerticalPodAutoscaler", "LimitRange", "Pod", "DaemonSet"];

/// Lists every object a pass reads, once. With `--vpa-object-namespace`,
/// the namespaced kinds of that namespace only, as upstream's updater
/// lists them: a cluster's pods are read only where they can be planned.
///
/// # Errors
/// A required kind that cannot be listed, in kubectl's words.
pub async fn gather(
    connection: &Connection,
    only: Option<&str>,
) -> Result<Vec<Value>, ClusterError> {
    let client = &connection.client;
    let mut out = Vec::new();
    for (group, version, kind, plural, required) in KINDS {
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = match only {
            Some(namespace) if IN_VPA_NAMESPACE.contains(&kind) => {
                Api::namespaced_with(client.clone(), namespace, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for object in list.items {
                    let mut value = serde_json::to_value(&object)
                        .map_err(|e| ClusterError::Other(format!("{plural}.{group}: {e}")))?;
                    value["apiVersion"] = resource.api_version.clone().into();
                    value["kind"] = kind.into();
                    out.push(value);
                }
            }
            Err(error) if !required => {
                tracing::debug!(%error, kind, "not listed");
            }
            Err(error) => return Err(connection.error(&error)),
        }
    }
    Ok(out)
}

/// Whether nodescope's webhook renewed its status Lease within `timeout`.
pub async fn webhook_fresh(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> bool {
    crate::update::cluster::webhook_fresh(client, &(namespace.to_owned(), name.to_owned()), timeout)
        .await
}
