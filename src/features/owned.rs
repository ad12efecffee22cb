//! The Features nodescope owns (`owned.yaml`, built into the binary), and
//! their creation by the features controller when absent (KEP-3920's
//! "announcing features"). Must not: change a Feature that exists.

use super::cluster::feature_resource;
use kube::api::{Api, DynamicObject, PostParams};
use kube::Client;
use serde_json::Value;

const OWNED: &str = include_str!("owned.yaml");

/// The owned Features, as `owned.yaml` declares them.
#[must_use]
pub fn features() -> Vec<Value> {
    // Parsed by a test of this module: a broken file fails the build's tests,
    // never a cluster.
    serde_saphyr::from_multiple::<Value>(OWNED)
        .unwrap_or_default()
        .into_iter()
        .filter(Value::is_object)
        .collect()
}

/// Creates each owned Feature that does not exist; returns the names
/// created. One that exists is left as it is (`AlreadyExists`).
///
/// # Errors
/// A creation refused for another reason than existing.
pub async fn announce(client: &Client, manager: &str) -> Result<Vec<String>, kube::Error> {
    let mut created = Vec::new();
    for feature in features() {
        let namespace = feature
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("kube-system");
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &feature_resource());
        let object: DynamicObject =
            serde_json::from_value(feature.clone()).map_err(kube::Error::SerdeError)?;
        let params = PostParams {
            field_manager: Some(manager.to_owned()),
            ..PostParams::default()
        };
        match api.create(&params, &object).await {
            Ok(_) => created.push(format!(
                "{namespace}/{}",
                object.metadata.name.unwrap_or_default()
            )),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error),
        }
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodescope_owns_vpa_node_scope_and_balloon_pods_both_enabled() {
        let owned: Vec<(String, String, String)> = features()
            .iter()
            .map(|f| {
                let at = |p: &str| {
                    f.pointer(p)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                (
                    at("/metadata/namespace"),
                    at("/metadata/name"),
                    at("/spec/desired"),
                )
            })
            .collect();
        assert_eq!(
            owned,
            [
                (
                    "kube-system".to_owned(),
                    "vpa-node-scope".to_owned(),
                    "Enabled".to_owned()
                ),
                (
                    "kube-system".to_owned(),
                    "balloon-pods".to_owned(),
                    "Enabled".to_owned()
                ),
            ]
        );
    }
}
