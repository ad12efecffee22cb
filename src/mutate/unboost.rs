//! Taking a startup boost back: which of a pod's boosts have run their
//! course, and what its containers get then. Upstream VPA 1.8's
//! `GetExpiredStartupCPUBoostAnnotations` (pkg/utils/vpa/api.go) and the
//! in-place calculator's unboost (pkg/updater/inplace/resource_updates.go),
//! with the pod's group in place of the DaemonSet-wide recommendation.
//! Pure: the time is an input.

use super::boost::{boost_annotation_key, recorded_originals, STARTUP_CPU_BOOST_ANNOTATION_PREFIX};
use super::capping::Current;
use super::pod::PodView;
use super::{parse_list, ContainerSizing, Sizing};
use crate::vpa::VpaPolicy;

/// The containers whose boost has expired, by name: the pod is Ready and
/// has been for longer than the container's `durationSeconds` since the
/// Ready condition's `lastTransitionTime` (`ready_since`; without one,
/// upstream reads Go's zero time, long past). A duration of 0 expires as
/// soon as the pod is Ready. `boosted` are the names from the pod's
/// `vpaCpuStartupBoost/<container>` annotations.
///
/// Upstream compares nanoseconds (`time.Since(ready) > duration`); with
/// whole seconds, `now - ready >= duration` is the same test but at the
/// very nanosecond the duration ends.
pub fn expired_boosts<'a>(
    boosted: impl IntoIterator<Item = &'a str>,
    vpa: &VpaPolicy,
    ready: bool,
    ready_since: Option<i64>,
    now: i64,
) -> Vec<&'a str> {
    if !ready {
        return Vec::new();
    }
    boosted
        .into_iter()
        .filter(|container| {
            let duration = vpa.startup_boost_duration(container);
            duration == 0 || ready_since.is_none_or(|since| now - since >= duration)
        })
        .collect()
}

/// The container names of a pod's boost annotations.
pub fn boosted_containers<'a>(
    annotations: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> impl Iterator<Item = &'a str> {
    annotations
        .into_iter()
        .filter_map(|(k, _)| k.strip_prefix(STARTUP_CPU_BOOST_ANNOTATION_PREFIX))
}

/// What the in-place unboost gives each container (upstream
/// `resourcesInplaceUpdatesPatchCalculator`): an expired container gets
/// what `sizing` (the webhook's arithmetic without the boost) gives it,
/// or, when that is nothing (no recommendation, or updateMode `Off`), the
/// resources its boost annotation recorded; a container still boosted is
/// left alone; any other gets its sizing, unless the VPA is `Off`.
///
/// # Errors
/// When an expired container's annotation is needed and is not the JSON
/// upstream writes (upstream's update then fails the same way).
pub fn unboost_sizing(
    pod: &PodView<'_>,
    vpa: &VpaPolicy,
    sizing: &Sizing,
    expired: &[&str],
) -> Result<Sizing, String> {
    let off = !vpa.applies_at_admission();
    let mut warnings = Vec::new();
    let mut containers = Vec::new();
    for (index, c) in pod.spec.containers.iter().enumerate() {
        let name = &*c.name;
        let key = boost_annotation_key(name);
        let sized = sizing
            .containers
            .iter()
            .find(|s| s.index == index)
            .filter(|s| !off && (!s.requests.is_empty() || !s.limits.is_empty()));
        if expired.contains(&name) {
            if let Some(sized) = sized {
                containers.push(sized.clone());
                continue;
            }
            let Some(value) = pod.annotation(&key) else {
                continue;
            };
            let (requests, limits) = recorded_originals(&key, value)?;
            let list = |texts, field, warnings: &mut Vec<String>| {
                parse_list(texts, field, name, warnings)
                    .ok_or_else(|| format!("annotation {key}: a {field} quantity does not parse"))
            };
            let requests: Current = list(requests.as_ref(), "requests", &mut warnings)?;
            let limits: Current = list(limits.as_ref(), "limits", &mut warnings)?;
            containers.push(ContainerSizing {
                index,
                requests,
                limits,
                notes: Vec::new(),
            });
        } else if pod.annotation(&key).is_some() || off {
            continue;
        } else if let Some(sized) = sized {
            containers.push(sized.clone());
        }
    }
    Ok(Sizing {
        containers,
        warnings: sizing.warnings.clone(),
        unusable: sizing.unusable,
        marked: sizing.marked,
    })
}
