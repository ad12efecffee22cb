//! Kubernetes objects to the mutation's domain types, once, at load or
//! watch time: every quantity is parsed here so a request never parses one.

use crate::json::borrowed::{JsonMap, QuantityText, Str};
use crate::quantity::Quantity;
use crate::vpa::crd::{ResourceTexts, StartupBoostSpec, VpaSpec};
use crate::vpa::ScopeKey;
use crate::vpa::{
    BoostKind, ContainerMode, ContainerPolicy, ControlledValues, CpuBoost, LimitKind,
    LimitRangeItem, RecommendationTable, ResourceList, StartupBoost, TableBuilder, UpdateMode,
    VpaPolicy,
};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashSet;
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

/// `startupBoost` at `field`. The type is kept as written (see
/// [`crate::vpa::boost`]); a number or quantity that is not one leaves the
/// VPA out, like a wrong `minAllowed`.
fn startup_boost(
    object: &str,
    field: &str,
    spec: &StartupBoostSpec,
) -> Result<StartupBoost, ConvertError> {
    let Some(cpu) = &spec.cpu else {
        return Ok(StartupBoost { cpu: None });
    };
    let error = |part: &str, reason: String| ConvertError {
        object: object.to_owned(),
        field: format!("{field}.cpu.{part}"),
        reason,
    };
    let int32 = |part: &str, value: &Option<Value>| match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| error(part, format!("expected a 32-bit integer, got {v}"))),
    };
    let quantity = match &cpu.quantity {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(
            text.parse::<Quantity>()
                .map_err(|e| error("quantity", e.to_string()))?,
        ),
        Some(Value::Number(n)) => Some(
            n.to_string()
                .parse::<Quantity>()
                .map_err(|e| error("quantity", e.to_string()))?,
        ),
        Some(other) => {
            return Err(error(
                "quantity",
                format!("expected a quantity string, got {other}"),
            ))
        }
    };
    Ok(StartupBoost {
        cpu: Some(CpuBoost {
            kind: match cpu.type_.as_deref() {
                None | Some("") | Some("Factor") => BoostKind::Factor,
                Some("Quantity") => BoostKind::Quantity,
                Some(other) => BoostKind::Other(other.to_owned()),
            },
            factor: int32("factor", &cpu.factor)?,
            quantity,
            duration_seconds: int32("durationSeconds", &cpu.duration_seconds)?,
        }),
    })
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
        Some("InPlace") => UpdateMode::InPlace,
        Some(other) => {
            return Err(ConvertError {
                object: object.to_owned(),
                field: "spec.updatePolicy.updateMode".into(),
                reason: format!("unknown mode {other:?} (expected Off, Initial, Recreate, InPlaceOrRecreate, InPlace or Auto)"),
            })
        }
    })
}

/// The parts of a VerticalPodAutoscaler the store keeps, read straight from
/// JSON (or a `Value`) in one pass: `lowerBound`, `upperBound`,
/// `uncappedTarget`, conditions and the rest are skipped by serde, and
/// strings borrow from the input.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct VpaDoc<'a> {
    #[serde(borrow)]
    pub metadata: MetaDoc<'a>,
    pub spec: VpaSpec,
    #[serde(borrow)]
    pub status: Option<StatusDoc<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MetaDoc<'a> {
    #[serde(borrow)]
    pub name: Option<Str<'a>>,
    #[serde(borrow)]
    pub namespace: Option<Str<'a>>,
    #[serde(borrow)]
    pub creation_timestamp: Option<Str<'a>>,
    #[serde(borrow)]
    pub resource_version: Option<Str<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct StatusDoc<'a> {
    #[serde(borrow)]
    recommendation: Option<RecommendationDoc<'a>>,
    #[serde(borrow)]
    recommendation_groups: Vec<GroupDoc<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RecommendationDoc<'a> {
    #[serde(borrow)]
    container_recommendations: Vec<ContainerDoc<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct GroupDoc<'a> {
    #[serde(borrow)]
    scope_value: Str<'a>,
    #[serde(borrow)]
    container_recommendations: Vec<ContainerDoc<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ContainerDoc<'a> {
    #[serde(borrow)]
    container_name: Str<'a>,
    #[serde(borrow)]
    target: Option<JsonMap<Str<'a>, QuantityText<'a>>>,
}

/// Shares one allocation per distinct node name across every VPA of a load:
/// 100 DaemonSets on the same 5,000 nodes keep 5,000 names, not 500,000.
#[derive(Debug, Default)]
pub struct Interner(HashSet<Arc<str>>);

impl Interner {
    /// The shared copy of `name`.
    pub fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(existing) = self.0.get(name) {
            return existing.clone();
        }
        let shared: Arc<str> = Arc::from(name);
        self.0.insert(shared.clone());
        shared
    }
}

/// One row's containers into `builder`.
fn fill_rows(builder: &mut TableBuilder, containers: &[ContainerDoc<'_>]) {
    for c in containers {
        if !builder.container(&c.container_name) {
            continue;
        }
        // A target that does not parse is that container's problem alone:
        // it gets no recommendation from this row (the webhook and the
        // updater say why), the rest of the VPA still applies.
        for (name, text) in c.target.iter().flat_map(|t| t.0.iter()) {
            match Quantity::parse(&text.0) {
                Ok(q) => builder.set(name, &q),
                Err(e) => builder.unparsable(name, &text.0, &format!("does not parse: {e}")),
            }
        }
    }
}

fn recommendation_table(
    status: Option<&StatusDoc<'_>>,
    interner: &mut Interner,
) -> RecommendationTable {
    let mut builder = TableBuilder::default();
    let Some(status) = status else {
        return builder.finish();
    };
    for group in &status.recommendation_groups {
        builder.group(interner.intern(&group.scope_value));
        fill_rows(&mut builder, &group.container_recommendations);
    }
    if let Some(r) = &status.recommendation {
        builder.aggregate();
        fill_rows(&mut builder, &r.container_recommendations);
    }
    builder.finish()
}

/// The VPA's name as messages and the `vpaUpdates` annotation show it.
pub(crate) fn vpa_ref(meta: &MetaDoc<'_>) -> String {
    format!(
        "VerticalPodAutoscaler {}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// A VPA is nodescope's business when it has a scope (KEP-4943's `node` or
/// any AEP-10031 label key) and targets an apps/v1 DaemonSet.
pub(crate) fn scoped_daemonset_target(spec: &VpaSpec) -> Option<&str> {
    let target = spec.target_ref.as_ref()?;
    (spec.scope.as_deref().is_some_and(|s| !s.is_empty())
        && target.kind == "DaemonSet"
        && target.api_version == "apps/v1"
        && !target.name.is_empty())
    .then_some(target.name.as_str())
}

/// Reduces a node-scoped VPA to what admission needs.
pub(crate) fn vpa_policy(
    vpa: &VpaDoc<'_>,
    interner: &mut Interner,
) -> Result<VpaPolicy, ConvertError> {
    let object = vpa_ref(&vpa.metadata);
    let spec = &vpa.spec;
    let mode = update_mode(
        &object,
        spec.update_policy
            .as_ref()
            .and_then(|p| p.update_mode.as_deref()),
    )?;
    let evict_after_oom_seconds = match spec
        .update_policy
        .as_ref()
        .and_then(|p| p.extra.get("evictAfterOOMSeconds"))
    {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => match v.as_i64().filter(|s| (1..=i64::from(i32::MAX)).contains(s)) {
            Some(s) => Some(s),
            None => {
                return Err(ConvertError {
                    object,
                    field: "spec.updatePolicy.evictAfterOOMSeconds".into(),
                    reason: format!(
                        "{v} is not a whole number of seconds from 1 to {}",
                        i32::MAX
                    ),
                })
            }
        },
    };
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
        if let Some(b) = &p.startup_boost {
            policy.startup_boost = Some(startup_boost(&object, &field("startupBoost"), b)?);
        }
        container_policies.push(policy);
    }
    let startup_boost = match &spec.startup_boost {
        Some(b) => Some(startup_boost(&object, "spec.startupBoost", b)?),
        None => None,
    };
    let recommendations = recommendation_table(vpa.status.as_ref(), interner);
    let scope = ScopeKey::parse(spec.scope.as_deref().unwrap_or_default(), |key| {
        interner.intern(key)
    })
    .unwrap_or_default();
    Ok(VpaPolicy {
        scope,
        namespace: vpa
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
            .to_owned(),
        name: vpa.metadata.name.as_deref().unwrap_or_default().to_owned(),
        update_mode: mode,
        container_policies,
        recommendations,
        evict_after_oom_seconds,
        startup_boost,
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
