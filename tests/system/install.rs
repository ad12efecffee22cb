//! nodescope installed from `manifests/` as a user installs it: the base
//! with the recommender, updater, balloon, native-policies and VPA CRD
//! components, rendered by `kubectl kustomize` and applied. Two changes
//! only: the webhook configurations call the replicas by a loopback `url:`
//! with the suite's CA instead of the Service, and the Deployments are not
//! applied (no container runs here; each component runs as a process,
//! components.rs).

use crate::plane::Cluster;
use crate::support::cluster;
use base64::Engine as _;
use serde_json::Value;
use std::path::Path;

pub const COMPONENTS: &[&str] = &[
    "vpa-crd",
    "recommender",
    "updater",
    "balloon",
    "native-policies",
    "monitoring",
];

/// Everything the install renders, as objects.
pub struct Rendered {
    pub objects: Vec<Value>,
}

impl Rendered {
    pub fn deployment(&self, name: &str) -> &Value {
        self.objects
            .iter()
            .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("the manifests render no Deployment {name}"))
    }
}

/// The Prometheus Operator's kinds (PodMonitor, PrometheusRule): read by
/// the suite's own Prometheus (prometheus.rs), not applied, as there is no
/// Operator to take them.
pub fn for_prometheus(object: &Value) -> bool {
    object["apiVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("monitoring.coreos.com/"))
}

/// `kubectl kustomize` of the base and the components.
pub fn render(cluster: &Cluster) -> Rendered {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    let dir = cluster.plane.dir.join("install");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    // kustomize takes only relative paths: up to / from the temporary
    // directory, then down to the repository.
    let up = "../".repeat(dir.components().count().saturating_sub(1));
    let root = format!("{up}{}", root.display().to_string().trim_start_matches('/'));
    let components: Vec<String> = COMPONENTS
        .iter()
        .map(|c| format!("  - {root}/components/{c}\n"))
        .collect();
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {root}/base\ncomponents:\n{}",
        components.concat()
    );
    std::fs::write(dir.join("kustomization.yaml"), text).unwrap_or_else(|e| panic!("{e}"));
    let (code, out, err) = cluster.plane.kubectl(
        &["kustomize", "--load-restrictor=LoadRestrictionsNone", "."],
        &dir,
    );
    assert_eq!(code, 0, "kubectl kustomize:\n{err}");
    let objects = serde_saphyr::from_multiple::<Value>(&out)
        .unwrap_or_else(|e| panic!("the rendered manifests: {e}"))
        .into_iter()
        .filter(|o| !o.is_null())
        .collect();
    Rendered { objects }
}

/// Applies what `render` gave but the Deployments, with each webhook's
/// `clientConfig` pointing at `https://127.0.0.1:{port}` and trusting `ca`.
/// Only the objects `keep` selects: the webhook configurations go in once
/// the replicas answer, as the Deployments' readiness would order it.
pub async fn apply(
    cluster: &Cluster,
    rendered: &Rendered,
    port: u16,
    ca: &[u8],
    keep: impl Fn(&Value) -> bool,
) -> usize {
    let client = cluster.plane.client().await;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let (crds, rest): (Vec<&Value>, Vec<&Value>) = rendered
        .objects
        .iter()
        .filter(|o| o["kind"] != "Deployment" && !for_prometheus(o) && keep(o))
        .partition(|o| o["kind"] == "CustomResourceDefinition");
    for crd in &crds {
        cluster::apply(&client, crd).await;
    }
    for crd in &crds {
        cluster::established(
            &client,
            crd["metadata"]["name"].as_str().unwrap_or_default(),
        )
        .await;
    }
    // Namespaces first, then everything else in the order rendered.
    let (namespaces, rest): (Vec<&Value>, Vec<&Value>) =
        rest.into_iter().partition(|o| o["kind"] == "Namespace");
    for object in namespaces.iter().chain(rest.iter()) {
        let mut object = (*object).clone();
        if object["kind"]
            .as_str()
            .is_some_and(|k| k.ends_with("WebhookConfiguration"))
        {
            for webhook in object["webhooks"].as_array_mut().into_iter().flatten() {
                let path = webhook["clientConfig"]["service"]["path"]
                    .as_str()
                    .unwrap_or("/")
                    .to_owned();
                webhook["clientConfig"] = serde_json::json!({
                    "url": format!("https://127.0.0.1:{port}{path}"),
                    "caBundle": ca,
                });
            }
        }
        cluster::apply(&client, &object).await;
    }
    crds.len() + namespaces.len() + rest.len()
}
