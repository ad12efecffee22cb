//! Kubernetes objects to the mutation's domain types, once, at load or
//! watch time: every quantity is parsed here so a request never parses one.

use super::crd::{ResourceTexts, VerticalPodAutoscaler};
use crate::mutate::recommendation::{
    ContainerMode, ContainerPolicy, ContainerRecommendation, ControlledValues, LimitKind,
    LimitRangeItem, ResourceList, UpdateMode, VpaPolicy,
};
use crate::quantity::Quantity;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// Why an object was left out of the snapshot: the object, the field, why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {field}: {reason}")]
pub struct ConvertError {
    pub object: String,
    pub field: String,
    pub reason: String,
}

fn resource_list(
    object: &str,
    field: &str,
    texts: &ResourceTexts,
) -> Result<ResourceList, ConvertError> {
    texts
        .iter()
        .map(|(name, value)| {
            let parsed = match value {
                Value::String(s) => s.parse::<Quantity>().map_err(|e| e.to_string()),
                Value::Number(n) => n.to_string().parse::<Quantity>().map_err(|e| e.to_string()),
                other => Err(format!("expected a quantity string, got {other}")),
            };
            parsed
                .map(|q| (name.clone(), q))
                .map_err(|reason| ConvertError {
                    object: object.to_owned(),
                    field: format!("{field}.{name}"),
                    reason,
                })
        })
        .collect()
}

fn update_mode(object: &str, text: Option<&str>) -> Result<UpdateMode, ConvertError> {
    Ok(match text {
        None | Some("") | Some("Auto") => UpdateMode::Auto,
        Some("Off") => UpdateMode::Off,
        Some("Initial") => UpdateMode::Initial,
        Some("Recreate") => UpdateMode::Recreate,
        Some("InPlaceOrRecreate") => UpdateMode::InPlaceOrRecreate,
        // InPlace resizes running pods but, like the others, starts new pods
        // with the recommendation.
        Some("InPlace") => UpdateMode::InPlaceOrRecreate,
        Some(other) => {
            return Err(ConvertError {
                object: object.to_owned(),
                field: "spec.updatePolicy.updateMode".into(),
                reason: format!("unknown mode {other:?} (expected Off, Initial, Recreate, InPlaceOrRecreate, InPlace or Auto)"),
            })
        }
    })
}

fn recommendations(
    object: &str,
    field: &str,
    containers: &[super::crd::RecommendedContainerResources],
) -> Result<Arc<[ContainerRecommendation]>, ConvertError> {
    containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let at = |part: &str| format!("{field}.containerRecommendations[{i}].{part}");
            let optional = |part: &str, texts: &Option<ResourceTexts>| {
                texts
                    .as_ref()
                    .map(|t| resource_list(object, &at(part), t))
                    .transpose()
                    .map(Option::unwrap_or_default)
            };
            Ok(ContainerRecommendation {
                container_name: c.container_name.clone(),
                target: resource_list(object, &at("target"), &c.target)?,
                lower_bound: optional("lowerBound", &c.lower_bound)?,
                upper_bound: optional("upperBound", &c.upper_bound)?,
                uncapped_target: optional("uncappedTarget", &c.uncapped_target)?,
            })
        })
        .collect()
}

/// The VPA's name as messages and the `vpaUpdates` annotation show it.
pub fn vpa_ref(vpa: &VerticalPodAutoscaler) -> String {
    format!(
        "VerticalPodAutoscaler {}/{}",
        vpa.metadata.namespace.as_deref().unwrap_or_default(),
        vpa.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Reduces a node-scoped VPA to what admission needs.
pub fn vpa_policy(vpa: &VerticalPodAutoscaler) -> Result<VpaPolicy, ConvertError> {
    let object = vpa_ref(vpa);
    let spec = &vpa.spec;
    let mode = update_mode(
        &object,
        spec.update_policy
            .as_ref()
            .and_then(|p| p.update_mode.as_deref()),
    )?;
    let mut container_policies = Vec::new();
    for (i, p) in spec
        .resource_policy
        .iter()
        .flat_map(|r| r.container_policies.iter())
        .enumerate()
    {
        let field = |part: &str| format!("spec.resourcePolicy.containerPolicies[{i}].{part}");
        let mut policy =
            ContainerPolicy::new(p.container_name.clone().unwrap_or_else(|| "*".into()));
        policy.mode = match p.mode.as_deref() {
            None | Some("") | Some("Auto") => ContainerMode::Auto,
            Some("Off") => ContainerMode::Off,
            Some(other) => {
                return Err(ConvertError {
                    object,
                    field: field("mode"),
                    reason: format!("unknown mode {other:?} (expected Auto or Off)"),
                })
            }
        };
        if let Some(t) = &p.min_allowed {
            policy.min_allowed = resource_list(&object, &field("minAllowed"), t)?;
        }
        if let Some(t) = &p.max_allowed {
            policy.max_allowed = resource_list(&object, &field("maxAllowed"), t)?;
        }
        if let Some(r) = &p.controlled_resources {
            policy.controlled_resources = r.clone();
        }
        policy.controlled_values = match p.controlled_values.as_deref() {
            None | Some("") | Some("RequestsAndLimits") => ControlledValues::RequestsAndLimits,
            Some("RequestsOnly") => ControlledValues::RequestsOnly,
            Some(other) => {
                return Err(ConvertError {
                    object,
                    field: field("controlledValues"),
                    reason: format!(
                        "unknown value {other:?} (expected RequestsAndLimits or RequestsOnly)"
                    ),
                })
            }
        };
        container_policies.push(policy);
    }
    let mut node_recommendations = HashMap::new();
    let mut aggregate = None;
    if let Some(status) = &vpa.status {
        for (i, group) in status.recommendation_groups.iter().enumerate() {
            let recs = recommendations(
                &object,
                &format!("status.recommendationGroups[{i}]"),
                &group.container_recommendations,
            )?;
            node_recommendations.insert(group.scope_value.clone(), recs);
        }
        if let Some(r) = &status.recommendation {
            aggregate = Some(recommendations(
                &object,
                "status.recommendation",
                &r.container_recommendations,
            )?);
        }
    }
    Ok(VpaPolicy {
        namespace: vpa.metadata.namespace.clone().unwrap_or_default(),
        name: vpa.metadata.name.clone().unwrap_or_default(),
        update_mode: mode,
        container_policies,
        node_recommendations,
        aggregate,
    })
}

/// The Container and Pod items of a LimitRange; other types do not bound pods.
pub fn limit_range_items(
    lr: &k8s_openapi::api::core::v1::LimitRange,
) -> Result<Vec<LimitRangeItem>, ConvertError> {
    let object = format!(
        "LimitRange {}/{}",
        lr.metadata.namespace.as_deref().unwrap_or_default(),
        lr.metadata.name.as_deref().unwrap_or_default()
    );
    let mut items = Vec::new();
    for (i, limit) in lr.spec.iter().flat_map(|s| s.limits.iter()).enumerate() {
        let kind = match limit.type_.as_str() {
            "Container" => LimitKind::Container,
            "Pod" => LimitKind::Pod,
            _ => continue,
        };
        let list = |part: &str,
                    map: &Option<
            std::collections::BTreeMap<
                String,
                k8s_openapi::apimachinery::pkg::api::resource::Quantity,
            >,
        >| {
            let texts: ResourceTexts = map
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), Value::String(v.0.clone())))
                .collect();
            resource_list(&object, &format!("spec.limits[{i}].{part}"), &texts)
        };
        let mut item = LimitRangeItem::new(kind);
        item.min = list("min", &limit.min)?;
        item.max = list("max", &limit.max)?;
        item.default = list("default", &limit.default)?;
        item.default_request = list("defaultRequest", &limit.default_request)?;
        item.max_limit_request_ratio =
            list("maxLimitRequestRatio", &limit.max_limit_request_ratio)?;
        items.push(item);
    }
    Ok(items)
}
