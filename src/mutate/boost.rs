//! AEP-7862's CPU startup boost at admission (upstream VPA 1.8,
//! `resource_updates.go`: `applyCPUStartupBoost`, `calculateBoostedCPU`,
//! `applyControlledCPUResources`, `capStartupBoostToContainerLimit`), on
//! the pod's *group* target instead of the DaemonSet-wide one.
//!
//! Pure, like the rest of the mutation. Upstream fails the whole pod's
//! patch when a boost is malformed (the pod is then admitted unchanged);
//! nodescope gives the same outcome, an unchanged pod, with the reason as
//! a warning rather than an error.

use super::annotations::annotation_ops;
use super::capping::{proportional_limit, Current, CPU, MEMORY};
use super::patch::write_json_str;
use super::pod::{PodView, ResourceTexts};
use super::{
    mark, parse_list, resize_ops, size_pod, ContainerSizing, MissingNodeRecommendation, Mutation,
    Originals, Placement, Sizing,
};
use crate::quantity::{Format, Quantity};
use crate::vpa::{
    BoostKind, ContainerMode, ControlledValues, CpuBoost, LimitRangeItem, ResourceList, VpaPolicy,
};

/// Upstream's annotation prefix (`StartupCPUBoostAnnotationPrefix`): one
/// annotation per boosted container, holding its resources from before
/// the boost, which the updater restores when there is no recommendation.
pub const STARTUP_CPU_BOOST_ANNOTATION_PREFIX: &str = "vpaCpuStartupBoost/";

/// `vpaCpuStartupBoost/<container>`.
#[must_use]
pub fn boost_annotation_key(container: &str) -> String {
    format!("{STARTUP_CPU_BOOST_ANNOTATION_PREFIX}{container}")
}

/// The webhook's startup-boost settings: upstream's `CPUStartupBoost`
/// feature gate (alpha since VPA 1.6, off by default) and
/// `--max-allowed-cpu-boost` (unset by default: no cap).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoostSettings {
    /// `--feature-gates CPUStartupBoost=true`.
    pub enabled: bool,
    /// `--max-allowed-cpu-boost`; `None` or zero: no cap, as upstream.
    pub max_allowed_cpu_boost: Option<Quantity>,
}

/// Why a boost cannot be computed: upstream's errors, word for word.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BoostError {
    /// `type: Factor` (or no type) without `factor`.
    #[error("startupBoost.CPU.Factor is required when Type is Factor or not specified")]
    FactorMissing,
    /// `factor` below 1 would shrink the pod.
    #[error("boost factor must be >= 1")]
    FactorBelowOne,
    /// `type: Quantity` without `quantity`.
    #[error("startupBoost.CPU.Quantity is required when Type is Quantity")]
    QuantityMissing,
    /// A type the API does not define.
    #[error("unsupported startup boost type: {0}")]
    UnsupportedType(String),
}

/// Upstream `calculateBoostedCPUValue` and the `--max-allowed-cpu-boost`
/// cap of `calculateBoostedCPU`: `base` times the factor, or plus the
/// quantity, in millicores.
///
/// # Errors
/// Upstream's, as [`BoostError`].
pub fn boosted_cpu(
    base: &Quantity,
    boost: &CpuBoost,
    max: Option<&Quantity>,
) -> Result<Quantity, BoostError> {
    let milli = match &boost.kind {
        BoostKind::Factor => {
            let factor = boost.factor.ok_or(BoostError::FactorMissing)?;
            if factor < 1 {
                return Err(BoostError::FactorBelowOne);
            }
            // Upstream multiplies in float64, exact for any realistic
            // millicore count; past i64 it would wrap, this saturates.
            base.milli_value().saturating_mul(i64::from(factor))
        }
        BoostKind::Quantity => {
            let add = boost.quantity.as_ref().ok_or(BoostError::QuantityMissing)?;
            base.milli_value().saturating_add(add.milli_value())
        }
        BoostKind::Other(kind) => return Err(BoostError::UnsupportedType(kind.clone())),
    };
    let boosted = Quantity::from_milli(milli, Format::DecimalSI);
    Ok(match max.filter(|m| !m.is_zero()) {
        Some(max) if boosted > *max => max.clone(),
        _ => boosted,
    })
}

/// [`super::mutate_pod`] with the startup boost of `settings`: the pod's
/// group target (or, for a VPA in updateMode `Off`, its own request, as
/// upstream) boosted for every container with a boost, and upstream's
/// `vpaCpuStartupBoost/<container>` annotation.
pub fn mutate_pod_with(
    pod: &PodView<'_>,
    vpa: &VpaPolicy,
    placement: Placement<'_>,
    limit_ranges: &[LimitRangeItem],
    missing: MissingNodeRecommendation,
    settings: &BoostSettings,
) -> Mutation {
    let boosting = settings.enabled && vpa.has_startup_boost();
    // updateMode Off applies no recommendation, but still the boost.
    let off = !vpa.applies_at_admission();
    let mut sizing = if boosting && off {
        let mut warnings = Vec::new();
        let marked = match Originals::of(pod) {
            Ok(o) => o.is_some(),
            Err(reason) => {
                warnings.push(format!(
                    "{reason}; recomputing from the pod's current resources"
                ));
                false
            }
        };
        Sizing {
            warnings,
            marked,
            ..Sizing::default()
        }
    } else {
        size_pod(pod, vpa, placement, limit_ranges, missing)
    };
    let mut boosts = Vec::new();
    if boosting {
        match apply_boost(pod, vpa, &mut sizing, off, settings) {
            Ok(annotations) => boosts = annotations,
            Err(error) => {
                let mut warnings = sizing.warnings;
                warnings.push(format!(
                    "startupBoost of VerticalPodAutoscaler {}/{}: {error}; pod left unchanged",
                    vpa.namespace, vpa.name
                ));
                return Mutation {
                    patch: super::Patch::default(),
                    warnings,
                    unusable: sizing.unusable,
                };
            }
        }
    }
    let mut patch = resize_ops(pod, &sizing);
    let resources_changed = !patch.is_empty();
    let new_mark = (!sizing.marked && !sizing.containers.is_empty())
        .then(|| mark::record(pod, sizing.containers.iter().map(|p| p.index)));
    annotation_ops(
        pod,
        vpa,
        &sizing.containers,
        resources_changed,
        new_mark,
        boosts,
        &mut patch,
    );
    Mutation {
        patch,
        warnings: sizing.warnings,
        unusable: sizing.unusable,
    }
}

/// Boosts the CPU request of every container that has a boost, in
/// `sizing`, and returns the boost annotations (key, value).
///
/// A container nodescope resized before is boosted from its recorded
/// originals (the mark), so a reinvocation over its own output computes
/// the same values and annotations and changes nothing.
fn apply_boost(
    pod: &PodView<'_>,
    vpa: &VpaPolicy,
    sizing: &mut Sizing,
    off: bool,
    settings: &BoostSettings,
) -> Result<Vec<(String, String)>, BoostError> {
    let originals = Originals::of(pod).ok().flatten();
    let mut annotations = Vec::new();
    for (index, c) in pod.spec.containers.iter().enumerate() {
        let name = &*c.name;
        let policy = vpa.container_policy(name);
        if policy.is_some_and(|p| p.mode == ContainerMode::Off) {
            continue;
        }
        let Some(boost) = vpa.startup_boost_for(name).and_then(|b| b.cpu.as_ref()) else {
            continue;
        };
        let (request_texts, limit_texts) = originals
            .as_ref()
            .and_then(|o| o.get(name))
            .unwrap_or((c.requests(), c.limits()));
        let Some(requests) = parse_list(request_texts, "requests", name, &mut sizing.warnings)
        else {
            continue;
        };
        let Some(limits) = parse_list(limit_texts, "limits", name, &mut sizing.warnings) else {
            continue;
        };
        let position = sizing.containers.iter().position(|s| s.index == index);
        let recommended = match position {
            Some(i) if !off => sizing.containers[i].requests.get(CPU).cloned(),
            _ => None,
        };
        // Upstream boosts the recommendation, or the pod's own request
        // when there is none (or it is zero).
        let zero = Quantity::from_i64(0, Format::DecimalSI);
        let base = recommended
            .filter(|q| !q.is_zero())
            .or_else(|| requests.get(CPU).cloned())
            .unwrap_or(zero);
        let boosted = boosted_cpu(&base, boost, settings.max_allowed_cpu_boost.as_ref())?;
        let i = position.unwrap_or_else(|| {
            let at = sizing
                .containers
                .iter()
                .position(|s| s.index > index)
                .unwrap_or(sizing.containers.len());
            sizing.containers.insert(
                at,
                ContainerSizing {
                    index,
                    requests: ResourceList::new(),
                    limits: ResourceList::new(),
                    notes: Vec::new(),
                },
            );
            at
        });
        let entry = &mut sizing.containers[i];
        let controlled =
            policy.map_or(ControlledValues::RequestsAndLimits, |p| p.controlled_values);
        entry.requests.insert(CPU, boosted.clone());
        match controlled {
            ControlledValues::RequestsOnly => cap_to_limit(&mut entry.requests, &limits),
            ControlledValues::RequestsAndLimits => {
                let (limit, _) = proportional_limit(
                    CPU,
                    limits.get(CPU),
                    requests.get(CPU),
                    Some(&boosted),
                    None,
                );
                if let Some(limit) = limit {
                    entry.limits.insert(CPU, limit);
                }
            }
        }
        annotations.push((
            boost_annotation_key(name),
            original_resources(&requests, &limits),
        ));
    }
    Ok(annotations)
}

/// Upstream `capStartupBoostToContainerLimit`: a boosted request above the
/// container's CPU limit becomes 1m below it (the limit itself when that is
/// 1m or less), so the pod keeps its QoS class.
fn cap_to_limit(requests: &mut ResourceList, limits: &Current) {
    let Some(limit) = limits.get(CPU) else {
        return;
    };
    let Some(request) = requests.get_mut(CPU) else {
        return;
    };
    if request.milli_value() > limit.milli_value() {
        let one = Quantity::from_milli(1, Format::DecimalSI);
        *request = if *limit > one {
            limit.checked_sub(&one).unwrap_or_else(|| limit.clone())
        } else {
            limit.clone()
        };
    }
}

/// Upstream `GetOriginalResourcesAnnotationValue`: the container's cpu and
/// memory requests and limits, as Go's `json.Marshal` writes them (fields
/// in struct order, keys sorted, canonical quantities, `{}` when empty).
fn original_resources(requests: &Current, limits: &Current) -> String {
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(b"{");
    for (n, (field, list)) in [("requests", requests), ("limits", limits)]
        .into_iter()
        .enumerate()
    {
        if n > 0 {
            out.push(b',');
        }
        write_json_str(&mut out, field);
        out.extend_from_slice(b":{");
        let mut first = true;
        for resource in [CPU, MEMORY] {
            let Some(q) = list.get(resource) else {
                continue;
            };
            if !first {
                out.push(b',');
            }
            first = false;
            write_json_str(&mut out, resource);
            out.push(b':');
            let mut text = String::new();
            q.write_canonical(&mut text);
            write_json_str(&mut out, &text);
        }
        out.push(b'}');
    }
    out.push(b'}');
    // Only valid UTF-8 strings and ASCII punctuation were written.
    String::from_utf8(out).unwrap_or_default()
}

/// The resources a boost annotation recorded: (requests, limits) as
/// texts, for the updater to restore when the pod has no recommendation.
///
/// # Errors
/// When the value is not the JSON upstream writes, naming the annotation.
pub fn recorded_originals<'a>(
    key: &str,
    value: &'a str,
) -> Result<(Option<ResourceTexts<'a>>, Option<ResourceTexts<'a>>), String> {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Recorded<'a> {
        #[serde(borrow)]
        requests: Option<ResourceTexts<'a>>,
        #[serde(borrow)]
        limits: Option<ResourceTexts<'a>>,
    }
    serde_json::from_str::<Recorded<'a>>(value)
        .map(|r| (r.requests, r.limits))
        .map_err(|e| format!("annotation {key}: {e}"))
}
