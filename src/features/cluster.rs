//! Reading the cluster for use discovery: the gating policies, the
//! Features, the objects the policies match (found through discovery, so
//! no kind is known here) and the Namespaces. Every LIST goes through
//! [`super::pages`]. The controller reads the matched objects page by page
//! ([`super::period`]); `nodescope features` against a live cluster keeps
//! them whole ([`read_view`]), since it prints every use.

use super::pages;
use super::uses::Listed;
use crate::json::str_at;
use crate::policy::PolicySet;
use crate::store::presence;
use crate::store::Snapshot;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject};
use kube::discovery::{ApiResource, Discovery};
use kube::Client;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Why a pass failed; the next pass starts over.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("listing {what}: {source}")]
    List {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("listing {what}: the continue token expired twice (410 Gone); the objects change faster than a paged list can read them")]
    Expired { what: String },
    #[error("discovery: {0}")]
    Discovery(#[source] kube::Error),
    #[error("the cluster's admission policies: {0}")]
    Policies(#[from] crate::policy::PolicyLoadError),
    #[error("{0}")]
    Uses(#[from] super::uses::UsesError),
    #[error("{0}")]
    Leader(#[from] crate::leader::LeaderError),
    #[error("encoding {what}: {source}")]
    Encode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}

/// The Feature API.
pub fn feature_resource() -> ApiResource {
    ApiResource {
        group: "featureflags.nodescope.dev".to_owned(),
        version: "v1alpha1".to_owned(),
        api_version: "featureflags.nodescope.dev/v1alpha1".to_owned(),
        kind: "Feature".to_owned(),
        plural: "features".to_owned(),
    }
}

/// What use discovery needs, read from the cluster.
pub struct View {
    pub policies: PolicySet,
    /// The Features asked about.
    pub features: Vec<Value>,
    pub listed: Vec<Listed>,
    /// The kinds of `listed`, to watch.
    pub resources: Vec<ApiResource>,
    /// Namespaces and the Features, for the policies' lookups.
    pub inputs: Snapshot,
}

/// Every Feature, in all namespaces, with its apiVersion and kind.
///
/// # Errors
/// When they cannot be listed.
pub async fn read_features(client: &Client) -> Result<Vec<Value>, ClusterError> {
    const WHAT: &str = "features.featureflags.nodescope.dev";
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &feature_resource());
    let features = match pages::all(&api, "Features").await {
        Ok(features) => features,
        // No Feature CRD: no Feature, nothing to manage until it is installed.
        Err(ClusterError::List { source, .. }) if presence::is_not_served(&source) => {
            presence::note(WHAT, false);
            return Ok(Vec::new());
        }
        Err(error) => return Err(error),
    };
    presence::note(WHAT, true);
    features
        .iter()
        .map(|f| {
            to_value(f, "a Feature").map(|mut f| {
                f["apiVersion"] = json!("featureflags.nodescope.dev/v1alpha1");
                f["kind"] = json!("Feature");
                f
            })
        })
        .collect()
}

/// The policies, the objects their gates of `features` match, and the
/// Namespaces.
///
/// # Errors
/// When any of them cannot be read, or a policy does not compile.
pub async fn read_view(client: &Client, features: Vec<Value>) -> Result<View, ClusterError> {
    let policies = cluster_policies(client).await?;
    let mut wanted: BTreeSet<(String, String)> = BTreeSet::new();
    for f in &features {
        for gate in policies.gating_policies(
            str_at(f, "/metadata/namespace"),
            str_at(f, "/metadata/name"),
        ) {
            wanted.extend(gate.resources);
        }
    }
    let matched = discover(client, &wanted).await?;
    let mut listed = Vec::with_capacity(matched.len());
    for m in &matched {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &m.resource);
        let what = m.what();
        let mut objects = Vec::new();
        for item in pages::all(&api, &what).await? {
            let mut value = to_value(&item, &what)?;
            value["apiVersion"] = json!(m.resource.api_version);
            value["kind"] = json!(m.resource.kind);
            objects.push(value);
        }
        listed.push(m.listed(objects));
    }
    Ok(View {
        policies,
        inputs: inputs(client, features.clone()).await?,
        features,
        listed,
        resources: matched.into_iter().map(|m| m.resource).collect(),
    })
}

/// The Namespaces and `features`, for the policies' lookups.
pub(super) async fn inputs(
    client: &Client,
    features: Vec<Value>,
) -> Result<Snapshot, ClusterError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut state: Vec<Value> = pages::all(&namespaces, "Namespaces")
        .await?
        .iter()
        .map(|n| {
            to_value(n, "a Namespace").map(|mut v| {
                v["apiVersion"] = json!("v1");
                v["kind"] = json!("Namespace");
                v
            })
        })
        .collect::<Result<_, _>>()?;
    state.extend(features);
    Ok(Snapshot::build(state))
}

/// The cluster's ValidatingAdmissionPolicies and bindings, compiled.
pub(super) async fn cluster_policies(client: &Client) -> Result<PolicySet, ClusterError> {
    let vaps: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let mut documents = Vec::new();
    for vap in pages::all(&vaps, "ValidatingAdmissionPolicies").await? {
        let mut value = to_value(&vap, "a ValidatingAdmissionPolicy")?;
        value["apiVersion"] = json!("admissionregistration.k8s.io/v1");
        value["kind"] = json!("ValidatingAdmissionPolicy");
        documents.push((
            format!("policy {}", vap.metadata.name.unwrap_or_default()),
            value.to_string(),
        ));
    }
    for binding in pages::all(&bindings, "ValidatingAdmissionPolicyBindings").await? {
        let mut value = to_value(&binding, "a ValidatingAdmissionPolicyBinding")?;
        value["apiVersion"] = json!("admissionregistration.k8s.io/v1");
        value["kind"] = json!("ValidatingAdmissionPolicyBinding");
        documents.push((
            format!("binding {}", binding.metadata.name.unwrap_or_default()),
            value.to_string(),
        ));
    }
    Ok(PolicySet::from_documents(documents)?)
}

/// A resource the gating policies match, as discovery found it.
pub(super) struct Matched {
    pub resource: ApiResource,
    pub namespaced: bool,
}

impl Matched {
    /// `pods (v1)`: the list, in logs and errors.
    pub fn what(&self) -> String {
        format!("{} ({})", self.resource.plural, self.resource.api_version)
    }

    /// Whether a gate's `(group, resource)` (either may be `*`) covers it.
    pub fn covered_by(&self, group: &str, resource: &str) -> bool {
        (group == "*" || group == self.resource.group)
            && (resource == "*" || resource == self.resource.plural)
    }

    /// `objects` of this resource, for use discovery.
    pub fn listed(&self, objects: Vec<Value>) -> Listed {
        Listed {
            group: self.resource.group.clone(),
            version: self.resource.version.clone(),
            resource: self.resource.plural.clone(),
            namespaced: self.namespaced,
            objects,
        }
    }
}

/// The listable `(group, resource)`s of `wanted`, at the version the
/// apiserver recommends, in the order of their [`Matched::what`].
pub(super) async fn discover(
    client: &Client,
    wanted: &BTreeSet<(String, String)>,
) -> Result<Vec<Matched>, ClusterError> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let mut discovery = Discovery::new(client.clone());
    if !wanted.iter().any(|(g, _)| g == "*") {
        let groups: Vec<&str> = wanted.iter().map(|(g, _)| g.as_str()).collect();
        discovery = discovery.filter(&groups);
    }
    let discovery = discovery.run().await.map_err(ClusterError::Discovery)?;
    let mut out: BTreeMap<String, Matched> = BTreeMap::new();
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            let matched = Matched {
                resource,
                namespaced: capabilities.scope == kube::discovery::Scope::Namespaced,
            };
            if wanted.iter().any(|(g, r)| matched.covered_by(g, r))
                && capabilities.supports_operation(kube::discovery::verbs::LIST)
            {
                out.insert(matched.what(), matched);
            }
        }
    }
    Ok(out.into_values().collect())
}

fn to_value(object: &impl serde::Serialize, what: &str) -> Result<Value, ClusterError> {
    serde_json::to_value(object).map_err(|source| ClusterError::Encode {
        what: what.to_owned(),
        source,
    })
}
