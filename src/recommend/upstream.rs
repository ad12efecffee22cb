//! Upstream's scoped checkpoints (kubernetes/autoscaler PR #10012, AEP-10031):
//! one `VerticalPodAutoscalerCheckpoint` per (VPA, container, scope value)
//! beside the global one per (VPA, container), as upstream's Go types
//! serialize them. Owns their names, JSON shape and the conversion from and
//! to the model; the API calls are [`super::cluster`]'s, the lossy histogram
//! arithmetic [`super::vpa`]'s.
//!
//! - Names: `<vpa>-<container>` for the global checkpoint;
//!   `<vpa>-<container>-<fnv32a(scope value) in lower-case hex>` for a scoped
//!   one (`pkg/utils/scope.CheckpointName`).
//! - `spec.scopeValue`: the scope value; `__empty__` for the empty value
//!   (so that it differs from a global checkpoint, which has none) and
//!   `__absent__` for a node without the label, as in the groups.
//! - `status`: `histogram.go`'s format, version `v3`: each bucket an
//!   integer out of 10,000 of the heaviest, the total weight kept.
//!
//! What it loses: bucket weights are rounded to 1/10,000 of the heaviest
//! bucket, so buckets under 1/20,000 of it vanish; the open memory windows
//! are left out and start again. The rounding moves a cumulative weight by
//! far less than a bucket holds, so a percentile moves at most to the next
//! bucket (5%) where it sat on a boundary; `tests/recommend_replay.rs`
//! checks that bound over a recorded week (its targets come out exact).

use super::aggregate::{AggregateContainerState, HistoryConfig};
use super::checkpoints::CheckpointError;
use super::model::{History, VpaKey};
use super::vpa::{VpaCheckpointStatus, VpaHistogramCheckpoint};
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub const API_VERSION: &str = "autoscaling.k8s.io/v1";
pub const KIND: &str = "VerticalPodAutoscalerCheckpoint";
/// Upstream `scope.EmptyLabelValue`.
pub const EMPTY: &str = "__empty__";

/// FNV-1a, 32 bits (Go's `hash/fnv.New32a`).
#[must_use]
pub fn fnv32a(text: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// Upstream `EncodeCheckpointScopeValue`.
#[must_use]
pub fn persisted_value(value: &str) -> &str {
    if value.is_empty() {
        EMPTY
    } else {
        value
    }
}

/// Upstream `DecodeCheckpointScopeValue`.
#[must_use]
pub fn runtime_value(persisted: &str) -> &str {
    if persisted == EMPTY {
        ""
    } else {
        persisted
    }
}

/// Upstream `CheckpointName`: `persisted` is `None` for the global
/// checkpoint.
#[must_use]
pub fn checkpoint_name(vpa: &str, container: &str, persisted: Option<&str>) -> String {
    match persisted {
        None | Some("") => format!("{vpa}-{container}"),
        Some(value) => format!("{vpa}-{container}-{:x}", fnv32a(value)),
    }
}

/// `metav1.Time` as Go writes it: whole seconds in UTC, or `null` for Go's
/// zero time.
fn time(t: Timestamp) -> Value {
    if t.as_second() <= super::gomath::GO_ZERO_UNIX_SECS {
        return Value::Null;
    }
    Value::String(
        Timestamp::from_second(t.as_second())
            .unwrap_or(t)
            .to_string(),
    )
}

/// A float as Go's `encoding/json` writes it: a whole number without a
/// fraction (`3`, not `3.0`); otherwise the shortest form that reads back
/// (the same digits in both for the weights a histogram holds).
fn go_float(f: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if f.fract() == 0.0 && f.abs() < EXACT {
        #[allow(clippy::cast_possible_truncation)]
        return json!(f as i64);
    }
    json!(f)
}

fn histogram(h: &VpaHistogramCheckpoint) -> Value {
    let mut out = Map::new();
    out.insert("referenceTimestamp".into(), time(h.reference_timestamp));
    // Go sorts map keys as strings ("10" before "9"), as serde_json does.
    if !h.bucket_weights.is_empty() {
        let weights: Map<String, Value> = h
            .bucket_weights
            .iter()
            .map(|(b, w)| (b.to_string(), json!(w)))
            .collect();
        out.insert("bucketWeights".into(), Value::Object(weights));
    }
    if h.total_weight != 0.0 {
        out.insert("totalWeight".into(), go_float(h.total_weight));
    }
    Value::Object(out)
}

/// The object upstream's checkpoint writer creates for `status` (its
/// `Create`; later writes replace only `/status`).
#[must_use]
pub fn object(
    namespace: &str,
    vpa: &str,
    container: &str,
    value: Option<&str>,
    status: &VpaCheckpointStatus,
    now: Timestamp,
) -> Value {
    let persisted = value.map(persisted_value);
    let mut spec = Map::new();
    spec.insert("vpaObjectName".into(), vpa.into());
    spec.insert("containerName".into(), container.into());
    if let Some(p) = persisted {
        spec.insert("scopeValue".into(), p.into());
    }
    let mut s = Map::new();
    s.insert("lastUpdateTime".into(), time(now));
    s.insert("version".into(), status.version.clone().into());
    s.insert("cpuHistogram".into(), histogram(&status.cpu_histogram));
    s.insert(
        "memoryHistogram".into(),
        histogram(&status.memory_histogram),
    );
    s.insert("firstSampleStart".into(), time(status.first_sample_start));
    s.insert("lastSampleStart".into(), time(status.last_sample_start));
    if status.total_samples_count != 0 {
        s.insert(
            "totalSamplesCount".into(),
            status.total_samples_count.into(),
        );
    }
    json!({
        "kind": KIND,
        "apiVersion": API_VERSION,
        "metadata": {
            "name": checkpoint_name(vpa, container, persisted),
            "namespace": namespace,
            "creationTimestamp": null,
        },
        "spec": spec,
        "status": s,
    })
}

/// One checkpoint object, read.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    pub namespace: String,
    pub vpa: String,
    pub container: String,
    /// The runtime scope value (`__empty__` decoded); `None` for a global
    /// checkpoint.
    pub value: Option<String>,
    pub status: VpaCheckpointStatus,
}

fn parse_time(v: Option<&Value>, field: &str) -> Result<Timestamp, String> {
    match v {
        None | Some(Value::Null) => {
            Ok(super::gomath::nanos_timestamp(super::gomath::GO_ZERO_NANOS))
        }
        Some(Value::String(s)) => s.parse().map_err(|e| format!("{field}: {s:?}: {e}")),
        Some(other) => Err(format!("{field}: {other} is not a time")),
    }
}

fn parse_histogram(v: Option<&Value>, field: &str) -> Result<VpaHistogramCheckpoint, String> {
    let empty = Map::new();
    let h = match v {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(other) => return Err(format!("{field}: {other} is not an object")),
    };
    let mut bucket_weights = BTreeMap::new();
    if let Some(weights) = h.get("bucketWeights") {
        let weights = weights
            .as_object()
            .ok_or_else(|| format!("{field}.bucketWeights: not an object"))?;
        for (bucket, weight) in weights {
            let b: i64 = bucket.parse().map_err(|_| {
                format!("{field}.bucketWeights: key {bucket:?} is not a bucket index")
            })?;
            let w = weight
                .as_u64()
                .and_then(|w| u32::try_from(w).ok())
                .ok_or_else(|| {
                    format!("{field}.bucketWeights[{bucket}]: {weight} is not a uint32")
                })?;
            bucket_weights.insert(b, w);
        }
    }
    let total_weight = match h.get("totalWeight") {
        None | Some(Value::Null) => 0.0,
        Some(v) => v
            .as_f64()
            .ok_or_else(|| format!("{field}.totalWeight: {v} is not a number"))?,
    };
    Ok(VpaHistogramCheckpoint {
        reference_timestamp: parse_time(
            h.get("referenceTimestamp"),
            &format!("{field}.referenceTimestamp"),
        )?,
        bucket_weights,
        total_weight,
    })
}

/// Reads one `VerticalPodAutoscalerCheckpoint`.
///
/// # Errors
/// A field that is not what upstream writes, named.
pub fn parse(object: &Value) -> Result<Checkpoint, CheckpointError> {
    let name = crate::manifest::object_ref(object);
    let invalid = |reason: String| CheckpointError::Invalid {
        object: name.clone(),
        reason,
    };
    let str_at = |p: &str| object.pointer(p).and_then(Value::as_str);
    let vpa = str_at("/spec/vpaObjectName")
        .ok_or_else(|| invalid("spec.vpaObjectName: missing".into()))?;
    let container = str_at("/spec/containerName")
        .ok_or_else(|| invalid("spec.containerName: missing".into()))?;
    let value = str_at("/spec/scopeValue")
        .filter(|v| !v.is_empty())
        .map(|v| runtime_value(v).to_owned());
    let status = object.get("status").cloned().unwrap_or(Value::Null);
    let count = match status.get("totalSamplesCount") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .ok_or_else(|| invalid(format!("status.totalSamplesCount: {v} is not a count")))?,
    };
    let status = VpaCheckpointStatus {
        version: status
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        first_sample_start: parse_time(status.get("firstSampleStart"), "status.firstSampleStart")
            .map_err(&invalid)?,
        last_sample_start: parse_time(status.get("lastSampleStart"), "status.lastSampleStart")
            .map_err(&invalid)?,
        total_samples_count: count,
        memory_histogram: parse_histogram(status.get("memoryHistogram"), "status.memoryHistogram")
            .map_err(&invalid)?,
        cpu_histogram: parse_histogram(status.get("cpuHistogram"), "status.cpuHistogram")
            .map_err(&invalid)?,
    };
    Ok(Checkpoint {
        namespace: str_at("/metadata/namespace").unwrap_or_default().to_owned(),
        vpa: vpa.to_owned(),
        container: container.to_owned(),
        value,
        status,
    })
}

/// The aggregate to checkpoint: `state` without the peaks of the memory
/// windows still open at `now` (upstream `subtractCurrentContainerMemoryPeak`),
/// so a restored recommender does not count them twice.
fn without_open_peaks(
    config: &HistoryConfig,
    state: &AggregateContainerState,
    open: &[(i64, i64)],
) -> AggregateContainerState {
    let mut state = state.clone();
    for &(peak, window_end_ms) in open {
        if let Ok(at) = Timestamp::from_millisecond(window_end_ms) {
            #[allow(clippy::cast_precision_loss)]
            state.subtract_memory_peak(config, peak as f64, at);
        }
    }
    state
}

/// Upstream's checkpoints of VPA `vpa` (`namespace/name`): per container,
/// the global one (the merge of its groups) and one per scope value.
#[must_use]
pub fn of_vpa(
    config: &HistoryConfig,
    history: &History,
    vpa: &VpaKey,
    now: Timestamp,
) -> Vec<Value> {
    let Some(containers) = history.vpas.get(vpa) else {
        return Vec::new();
    };
    let (namespace, name) = vpa.split_once('/').unwrap_or(("", vpa));
    let now_ms = now.as_millisecond();
    // (container, scope value) -> the open windows' (peak, end).
    let mut open: BTreeMap<(&str, &str), Vec<(i64, i64)>> = BTreeMap::new();
    for pod in history.pods.values() {
        let (Some(pod_vpa), Some(value)) = (&pod.vpa, &pod.value) else {
            continue;
        };
        if pod_vpa != vpa {
            continue;
        }
        for (container, _, state) in pod.containers.iter() {
            if now_ms < state.window_end_ms {
                open.entry((container, value))
                    .or_default()
                    .push((state.max_memory_peak(), state.window_end_ms));
            }
        }
    }
    let mut objects = Vec::new();
    for (container, h) in containers {
        let mut values: Vec<_> = h.groups.iter().collect();
        values.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut global = AggregateContainerState::default();
        for (value, state) in values {
            let open = open
                .get(&(&**container, &**value))
                .map_or(&[][..], Vec::as_slice);
            let state = without_open_peaks(config, state, open);
            global.merge(config, &state);
            objects.push(object(
                namespace,
                name,
                container,
                Some(value),
                &state.to_vpa_checkpoint(),
                now,
            ));
        }
        objects.push(object(
            namespace,
            name,
            container,
            None,
            &global.to_vpa_checkpoint(),
            now,
        ));
    }
    objects
}

/// The model from upstream's checkpoints: every scoped checkpoint becomes
/// its group (global ones are not needed: `status.recommendation` is the
/// merge of the groups). Returns it with the checkpoints that could not be
/// read.
#[must_use]
pub fn restore(config: &HistoryConfig, objects: &[Value]) -> (History, Vec<CheckpointError>) {
    let mut history = History::default();
    let mut errors = Vec::new();
    for object in objects {
        let read = parse(object).and_then(|c| {
            let mut state = AggregateContainerState::default();
            state
                .load_vpa_checkpoint(config, &c.status)
                .map_err(|source| CheckpointError::Histogram {
                    object: crate::manifest::object_ref(object),
                    source,
                })?;
            Ok((c, state))
        });
        match read {
            Ok((c, state)) => {
                let Some(value) = c.value else { continue };
                let key: VpaKey = std::sync::Arc::from(format!("{}/{}", c.namespace, c.vpa));
                let value = history.intern_value(&value);
                history
                    .container_entry(&key, &c.container)
                    .groups
                    .insert(value, state);
            }
            Err(e) => errors.push(e),
        }
    }
    (history, errors)
}

/// Takes the VPAs of `imported` that `history` has no history for (a VPA
/// nodescope already checkpointed keeps its own, exact history), and says
/// which.
pub fn import(history: &mut History, imported: History) -> Vec<VpaKey> {
    let mut taken = Vec::new();
    let mut vpas: Vec<_> = imported.vpas.into_iter().collect();
    vpas.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for (vpa, containers) in vpas {
        if history.vpas.contains_key(&vpa) {
            continue;
        }
        for (container, h) in containers {
            for (value, state) in h.groups {
                let value = history.intern_value(&value);
                history
                    .container_entry(&vpa, &container)
                    .groups
                    .insert(value, state);
            }
        }
        taken.push(vpa);
    }
    taken
}

#[cfg(test)]
#[path = "upstream_tests.rs"]
mod tests;
