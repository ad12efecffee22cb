//! The upstream VPA admission arithmetic: capping a recommendation to policy,
//! LimitRanges and existing limits, and scaling limits to keep their ratio.
//!
//! Ported from `pkg/utils/vpa/capping.go` and `limit_and_request_scaling.go`
//! so that a pod admitted by nodescope gets exactly the resources (and the
//! same annotation wording) the upstream admission controller would give it.
//! CPU is computed in milli-units and memory in whole units with `i128`
//! intermediates, like upstream's `big.Int`.

use crate::quantity::Quantity;

use crate::vpa::{resource_name, ContainerPolicy, ControlledValues, LimitRangeItem, ResourceList};

pub(crate) const CPU: &str = "cpu";
pub(crate) const MEMORY: &str = "memory";

/// A container's current requests or limits, parsed.
pub(crate) type Current = ResourceList;

fn zero() -> Quantity {
    Quantity::from_i64(0, crate::quantity::Format::DecimalSI)
}

fn get<'q>(list: &'q ResourceList, name: &str) -> Option<&'q Quantity> {
    list.get(name)
}

/// `scaled * result / base` in the resource's unit, floored like `big.Int.Div`.
/// Returns the value in `scaled`'s format and whether it was capped at
/// `i64::MAX` units; `None` when `base` is zero (upstream would panic).
pub(crate) fn scale_proportionally(
    resource: &str,
    scaled: &Quantity,
    base: &Quantity,
    result: &Quantity,
) -> Option<(Quantity, bool)> {
    scale(resource, scaled, base, result, false)
}

/// [`scale_proportionally`] rounded up to the next millicore for CPU
/// (upstream's `roundUpToFullUnit`): raising a pod to a LimitRange's min
/// must not leave it a millicore short. Memory is in whole units already.
fn scale_proportionally_up(
    resource: &str,
    scaled: &Quantity,
    base: &Quantity,
    result: &Quantity,
) -> Option<(Quantity, bool)> {
    scale(resource, scaled, base, result, resource == CPU)
}

fn scale(
    resource: &str,
    scaled: &Quantity,
    base: &Quantity,
    result: &Quantity,
    up: bool,
) -> Option<(Quantity, bool)> {
    let unit = |q: &Quantity| {
        if resource == CPU {
            i128::from(q.milli_value())
        } else {
            i128::from(q.value())
        }
    };
    let base_units = unit(base);
    if base_units == 0 {
        return None;
    }
    let product = unit(scaled) * unit(result);
    let mut value = product.div_euclid(base_units);
    if up && product.rem_euclid(base_units) != 0 {
        value += 1;
    }
    let (value, capped) = match i64::try_from(value) {
        Ok(v) => (v, false),
        Err(_) => (i64::MAX, true),
    };
    let q = if resource == CPU {
        Quantity::from_milli(value, scaled.format())
    } else {
        Quantity::from_i64(value, scaled.format())
    };
    Some((q, capped))
}

/// Upstream `getProportionalResourceLimit`: the new limit and an optional note.
pub(crate) fn proportional_limit<'q>(
    resource: &str,
    original_limit: Option<&'q Quantity>,
    original_request: Option<&'q Quantity>,
    recommended: Option<&'q Quantity>,
    default_limit: Option<&'q Quantity>,
) -> (Option<Quantity>, Option<String>) {
    let set = |q: Option<&'q Quantity>| q.filter(|q| q.value() != 0);
    let Some(limit) = set(original_limit).or(set(default_limit)) else {
        return (
            None,
            Some(format!(
                "{resource}: limit NOT set since originalLimit is nil or 0"
            )),
        );
    };
    let Some(recommended) = set(recommended) else {
        return (
            None,
            Some(format!(
                "{resource}: limit NOT set since recommendedRequest is nil or 0"
            )),
        );
    };
    // Without a request Kubernetes treats request as equal to the limit.
    let Some(request) = set(original_request) else {
        return (Some(recommended.clone()), None);
    };
    if request.milli_value() == limit.milli_value() {
        return (Some(recommended.clone()), None);
    }
    match scale_proportionally(resource, limit, request, recommended) {
        Some((q, false)) => (Some(q), None),
        Some((q, true)) => (
            Some(q),
            Some(format!(
                "{resource}: failed to keep limit to request ratio; capping limit to int64"
            )),
        ),
        None => (None, None),
    }
}

/// Upstream `GetBoundaryRequest`: the request whose proportional limit would
/// be exactly `boundary`. Zero means "no boundary".
fn boundary_request<'q>(
    resource: &str,
    request: Option<&'q Quantity>,
    limit: Option<&'q Quantity>,
    boundary: Option<&'q Quantity>,
    default_limit: Option<&'q Quantity>,
) -> Quantity {
    let set = |q: Option<&'q Quantity>| q.filter(|q| q.value() != 0);
    let boundary = boundary.cloned().unwrap_or_else(zero);
    let Some(limit) = set(limit).or(set(default_limit)) else {
        return zero();
    };
    let Some(request) = set(request) else {
        return boundary;
    };
    scale_proportionally(resource, request, limit, &boundary).map_or_else(zero, |(q, _)| q)
}

fn boundary_list(
    requests: &Current,
    limits: &Current,
    boundary: &ResourceList,
    default: &ResourceList,
) -> ResourceList {
    if boundary.is_empty() {
        return ResourceList::new();
    }
    [CPU, MEMORY]
        .into_iter()
        .map(|r| {
            let q = boundary_request(
                r,
                get(requests, r),
                get(limits, r),
                get(boundary, r),
                get(default, r),
            );
            (resource_name(r), q)
        })
        .collect()
}

fn cap_to_min(rec: &mut Quantity, min: Option<&Quantity>) -> bool {
    match min {
        Some(m) if !m.is_zero() && *rec < *m => {
            *rec = m.clone();
            true
        }
        _ => false,
    }
}

fn cap_to_max(rec: &mut Quantity, max: Option<&Quantity>) -> bool {
    match max {
        Some(m) if !m.is_zero() && *rec > *m => {
            *rec = m.clone();
            true
        }
        _ => false,
    }
}

/// Caps one container's target in upstream order: container LimitRange, then
/// the VPA policy, then (RequestsOnly) the container's own limits. Returns the
/// capping notes for the `vpaUpdates` annotation.
pub(crate) fn cap_container(
    target: &mut ResourceList,
    requests: &Current,
    limits: &Current,
    policy: Option<&ContainerPolicy>,
    limit_range: Option<&LimitRangeItem>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(lr) = limit_range {
        let max = boundary_list(requests, limits, &lr.max, &lr.default);
        // Both the limit and the request must stay above the LimitRange min.
        let mut min = boundary_list(requests, limits, &lr.min, &lr.default);
        for r in [CPU, MEMORY] {
            if let Some(m) = lr.min.get(r) {
                match min.get_mut(r) {
                    Some(slot) if m > slot => *slot = m.clone(),
                    Some(_) => {}
                    None if *m > zero() => min.insert(resource_name(r), m.clone()),
                    None => min.insert(resource_name(r), zero()),
                }
            }
        }
        for (name, rec) in target.iter_mut() {
            if cap_to_min(rec, min.get(name)) {
                notes.push(format!("{name} capped to fit Min in container LimitRange"));
            }
            if cap_to_max(rec, max.get(name)) {
                notes.push(format!("{name} capped to fit Max in container LimitRange"));
            }
        }
    }
    if let Some(p) = policy {
        for (name, rec) in target.iter_mut() {
            if cap_to_min(rec, p.min_allowed.get(name)) {
                notes.push(format!("{name} capped to minAllowed"));
            }
            if cap_to_max(rec, p.max_allowed.get(name)) {
                notes.push(format!("{name} capped to maxAllowed"));
            }
        }
    }
    let requests_only =
        policy.is_some_and(|p| p.controlled_values == ControlledValues::RequestsOnly);
    if requests_only {
        for (name, limit) in limits {
            if let Some(rec) = target.get_mut(name) {
                if rec.milli_value() > limit.milli_value() {
                    *rec = limit.clone();
                    notes.push(format!("{name} capped to container limit"));
                }
            }
        }
    }
    notes
}

/// Upstream `GetProportionalLimit` for cpu and memory: the new limits (empty
/// when neither gets one) and notes, which upstream only reports when at
/// least one limit is set.
pub(crate) fn proportional_limits(
    requests: &Current,
    limits: &Current,
    target: &ResourceList,
    default_limit: &ResourceList,
) -> (ResourceList, Vec<String>) {
    let mut out = ResourceList::new();
    let mut notes = Vec::new();
    for r in [CPU, MEMORY] {
        let (limit, note) = proportional_limit(
            r,
            get(limits, r),
            get(requests, r),
            get(target, r),
            get(default_limit, r),
        );
        if let Some(l) = limit {
            out.insert(resource_name(r), l);
        }
        notes.extend(note);
    }
    if out.is_empty() {
        notes.clear();
    }
    (out, notes)
}

/// One container taking part in Pod-level LimitRange capping.
pub(crate) struct PodMember<'c> {
    pub requests: &'c Current,
    pub limits: &'c Current,
    pub target: &'c mut ResourceList,
}

/// Upstream `applyPodLimitRange` for the targets of all recommended
/// containers: scales every container proportionally so the pod's total
/// request and limit fit the Pod LimitRange's min and max.
pub(crate) fn cap_pod(members: &mut [PodMember<'_>], lr: &LimitRangeItem) {
    for r in [CPU, MEMORY] {
        cap_pod_resource(members, lr, r);
    }
}

fn cap_pod_resource(members: &mut [PodMember<'_>], lr: &LimitRangeItem, r: &str) {
    let min = lr.min.get(r).cloned().unwrap_or_else(zero);
    let max = lr.max.get(r).cloned().unwrap_or_else(zero);
    let mut sum_limit = zero();
    let mut sum_rec = zero();
    for m in members.iter() {
        let rec = m.target.get(r);
        let (limit, _) = proportional_limit(
            r,
            m.limits.get(r),
            m.requests.get(r),
            rec,
            lr.default.get(r),
        );
        let (Some(sl), Some(sr)) = (
            limit.map_or(Some(sum_limit.clone()), |l| sum_limit.checked_add(&l)),
            rec.map_or(Some(sum_rec.clone()), |q| sum_rec.checked_add(q)),
        ) else {
            return; // beyond any real LimitRange; leave the pod alone
        };
        (sum_limit, sum_rec) = (sl, sr);
    }
    if min <= sum_limit && min <= sum_rec && (max.is_zero() || max >= sum_limit) {
        return;
    }
    let rescale = |members: &mut [PodMember<'_>], base: &Quantity, total: &Quantity, up: bool| {
        let scale = if up {
            scale_proportionally_up
        } else {
            scale_proportionally
        };
        for m in members.iter_mut() {
            if let Some(rec) = m.target.get_mut(r) {
                if let Some((q, _)) = scale(r, rec, base, total) {
                    *rec = q;
                }
            }
        }
    };
    if min > sum_rec && !sum_limit.is_zero() {
        rescale(members, &sum_rec, &min, true);
        return;
    }
    if sum_limit.is_zero() {
        return;
    }
    let mut total = zero();
    if min > sum_limit {
        total = min;
    }
    if !max.is_zero() && max < sum_limit {
        total = max;
    }
    rescale(members, &sum_limit, &total, false);
}
