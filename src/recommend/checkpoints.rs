//! Checkpoints: the model written to the API (or to files), so that a
//! restarted recommender continues where it stopped and writes exactly what
//! it would have written without the restart.
//!
//! Upstream writes one `VerticalPodAutoscalerCheckpoint` per (VPA,
//! container), and AEP-10031 one more per scope value: under a node scope on
//! 5,000 nodes that is 5,000 objects per container. Here a VPA's whole
//! history (every container, scope value and pod window) is one payload,
//! split by a hash of the scope value into as few shards as keep each
//! object under [`SHARD_LIMIT`] bytes, and written as
//! `RecommendationCheckpoint` objects named `<vpa>-<i>-of-<n>`: the number
//! of objects grows with the bytes of history, about one per 2,000 node
//! groups, not with the number of nodes.
//!
//! The payload is a JSON string in `spec.data`, not structured fields: the
//! apiserver then tracks one managed field, not one per histogram bucket, and
//! the object's size is the payload's.

use super::aggregate::{AggregateCheckpoint, AggregateContainerState};
use super::container::ContainerState;
use super::model::{ContainerHistory, History, ModelConfig, PodHistory, VpaKey};
use super::HistogramError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub const API_VERSION: &str = "nodescope.dev/v1alpha1";
pub const KIND: &str = "RecommendationCheckpoint";
/// The largest payload of one object: etcd refuses objects over 1.5 MiB,
/// and the object carries some metadata besides.
pub const SHARD_LIMIT: usize = 1024 * 1024;
/// The payload format; a checkpoint of another version is not read.
pub const VERSION: u32 = 1;

/// Why checkpoints could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoint {object}: {reason}")]
    Invalid { object: String, reason: String },
    #[error("checkpoint {object}: {source}")]
    Histogram {
        object: String,
        #[source]
        source: HistogramError,
    },
    #[error("VPA {vpa}: its history does not fit in {shards} checkpoints of {SHARD_LIMIT} bytes")]
    TooLarge { vpa: String, shards: usize },
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Payload {
    version: u32,
    /// By container: the aggregates of this shard's scope values.
    #[serde(default)]
    containers: BTreeMap<String, ContainerPayload>,
    /// By pod name: this shard's pods (by their scope value).
    #[serde(default)]
    pods: BTreeMap<String, PodPayload>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerPayload {
    #[serde(default)]
    groups: BTreeMap<String, AggregateCheckpoint>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodPayload {
    scope_value: String,
    containers: Vec<(String, i64, ContainerState)>,
}

/// FNV-1a: stable across builds and platforms, unlike `std`'s hasher.
fn shard_of(value: &str, shards: usize) -> usize {
    let mut hash: u32 = 0x811c_9dc5;
    for b in value.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash as usize % shards.max(1)
}

/// The object name of shard `i` of `n` of VPA `vpa`: within the 253
/// characters of a name (a long VPA name is cut and a hash of it appended).
#[must_use]
pub fn object_name(vpa: &str, i: usize, n: usize) -> String {
    let suffix = format!("-{i}-of-{n}");
    if vpa.len() + suffix.len() <= 253 {
        return format!("{vpa}{suffix}");
    }
    let hash = shard_of(vpa, usize::MAX);
    let cut: String = vpa.chars().take(253 - suffix.len() - 9).collect();
    format!("{}-{hash:08x}{suffix}", cut.trim_end_matches(['-', '.']))
}

fn payloads(
    containers: &BTreeMap<Arc<str>, ContainerHistory>,
    pods: &[(&String, &PodHistory)],
    n: usize,
) -> Vec<Payload> {
    let mut out: Vec<Payload> = (0..n)
        .map(|_| Payload {
            version: VERSION,
            ..Payload::default()
        })
        .collect();
    for (name, history) in containers {
        for (value, state) in &history.groups {
            if let Some(p) = out.get_mut(shard_of(value, n)) {
                let entry = p.containers.entry(name.to_string()).or_default();
                entry
                    .groups
                    .insert(value.to_string(), state.to_checkpoint());
            }
        }
    }
    for (key, pod) in pods {
        let Some(value) = pod.value.as_deref() else {
            continue;
        };
        let Some(p) = out.get_mut(shard_of(value, n)) else {
            continue;
        };
        let name = key.split_once('/').map_or(key.as_str(), |(_, n)| n);
        p.pods.insert(
            name.to_owned(),
            PodPayload {
                scope_value: value.to_owned(),
                containers: pod
                    .containers
                    .iter()
                    .map(|(c, m, s)| (c.to_string(), *m, *s))
                    .collect(),
            },
        );
    }
    out
}

/// The checkpoint objects of every VPA in `history`, stamped `written_at`
/// (RFC 3339), which tells a complete set from a half-written one; for
/// files and tests (the cluster writer takes them VPA by VPA, [`each_vpa`]).
///
/// # Errors
/// A VPA whose history does not fit in 4,096 shards.
pub fn checkpoints(history: &History, written_at: &str) -> Result<Vec<Value>, CheckpointError> {
    let mut objects = Vec::new();
    each_vpa(history, written_at, |o| objects.extend(o))?;
    Ok(objects)
}

/// Calls `write` with each VPA's checkpoint objects in turn (sorted by
/// VPA), so that only one VPA's encoding is in memory at a time.
///
/// # Errors
/// A VPA whose history does not fit in 4,096 shards.
pub fn each_vpa(
    history: &History,
    written_at: &str,
    mut write: impl FnMut(Vec<Value>),
) -> Result<(), CheckpointError> {
    let mut by_vpa: HashMap<&VpaKey, Vec<(&String, &PodHistory)>> = HashMap::new();
    for (key, pod) in &history.pods {
        if let Some(vpa) = &pod.vpa {
            by_vpa.entry(vpa).or_default().push((key, pod));
        }
    }
    let mut vpas: Vec<_> = history.vpas.iter().collect();
    vpas.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (vpa, containers) in vpas {
        let pods = by_vpa.get(vpa).map_or(&[][..], Vec::as_slice);
        write(vpa_objects(vpa, containers, pods, written_at)?);
    }
    Ok(())
}

/// The VPAs that have history, sorted.
#[must_use]
pub fn vpas(history: &History) -> Vec<VpaKey> {
    let mut keys: Vec<VpaKey> = history.vpas.keys().cloned().collect();
    keys.sort_unstable();
    keys
}

/// Forgets the group history of every VPA `is_scoped` does not name
/// (`namespace/name`), so that the next checkpoint write writes none for
/// it and deletes what it had: once Feature `vpa-node-scope` is `Off`, a
/// VPA no longer scoped keeps no groups (KEP-3920's clean Off).
pub fn forget_unscoped(history: &mut History, is_scoped: impl Fn(&str) -> bool) {
    history.vpas.retain(|key, _| is_scoped(key));
}

/// One VPA's checkpoint objects (none if it has no history): for a writer
/// that takes the model's lock for one VPA at a time.
///
/// # Errors
/// Its history does not fit in 4,096 shards.
pub fn of_vpa(
    history: &History,
    vpa: &VpaKey,
    written_at: &str,
) -> Result<Vec<Value>, CheckpointError> {
    let Some(containers) = history.vpas.get(vpa) else {
        return Ok(Vec::new());
    };
    let pods: Vec<(&String, &PodHistory)> = history
        .pods
        .iter()
        .filter(|(_, p)| p.vpa.as_ref() == Some(vpa))
        .collect();
    vpa_objects(vpa, containers, &pods, written_at)
}

fn encode(payloads: &[Payload]) -> Vec<String> {
    payloads
        .iter()
        .map(|p| serde_json::to_string(p).unwrap_or_default())
        .collect()
}

/// One VPA's objects. The shard count is guessed from the size of the
/// whole (a hash spreads values evenly, so a fifth of headroom is enough)
/// and doubled while a shard is still too large.
fn vpa_objects(
    vpa: &VpaKey,
    containers: &BTreeMap<Arc<str>, ContainerHistory>,
    pods: &[(&String, &PodHistory)],
    written_at: &str,
) -> Result<Vec<Value>, CheckpointError> {
    let (namespace, name) = vpa.split_once('/').unwrap_or(("", vpa));
    let whole = encode(&payloads(containers, pods, 1));
    let total: usize = whole.iter().map(String::len).sum();
    let mut n = if total <= SHARD_LIMIT {
        1
    } else {
        (total * 5 / 4 / SHARD_LIMIT + 1).next_power_of_two()
    };
    let mut texts = if n == 1 {
        whole
    } else {
        encode(&payloads(containers, pods, n))
    };
    while texts.iter().any(|t| t.len() > SHARD_LIMIT) {
        n *= 2;
        if n > 4096 {
            return Err(CheckpointError::TooLarge {
                vpa: vpa.to_string(),
                shards: 4096,
            });
        }
        texts = encode(&payloads(containers, pods, n));
    }
    Ok(texts
        .into_iter()
        .enumerate()
        .map(|(i, data)| {
            json!({
                "apiVersion": API_VERSION,
                "kind": KIND,
                "metadata": {
                    "name": object_name(name, i, n),
                    "namespace": namespace,
                    "labels": {"app.kubernetes.io/managed-by": "nodescope-recommender"},
                },
                "spec": {
                    "vpaName": name,
                    "shard": i,
                    "shards": n,
                    "writtenAt": written_at,
                    "data": data,
                },
            })
        })
        .collect())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    vpa_name: String,
    shard: usize,
    shards: usize,
    written_at: String,
    data: String,
}

/// Rebuilds the model from checkpoint objects. For each VPA the newest
/// complete set (every shard of one write) is read; an older or partial set
/// left by a writer that died mid-write is ignored.
///
/// # Errors
/// The first checkpoint that cannot be read (offline, where a bad file is
/// the user's to fix).
pub fn restore(config: &ModelConfig, objects: &[Value]) -> Result<History, CheckpointError> {
    let (history, mut errors) = restore_each(config, objects);
    if errors.is_empty() {
        Ok(history)
    } else {
        Err(errors.remove(0))
    }
}

/// [`restore`] for a running recommender: a checkpoint that cannot be read
/// costs its VPA's history (returned as an error to log), not every VPA's.
#[must_use]
pub fn restore_each(config: &ModelConfig, objects: &[Value]) -> (History, Vec<CheckpointError>) {
    type SetKey = (String, String, String, usize);
    let mut errors = Vec::new();
    let mut sets: BTreeMap<SetKey, BTreeMap<usize, (String, Spec)>> = BTreeMap::new();
    for object in objects {
        let name = crate::manifest::object_ref(object);
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let spec = object
            .get("spec")
            .cloned()
            .ok_or_else(|| "no spec".to_owned())
            .and_then(|s| serde_json::from_value::<Spec>(s).map_err(|e| e.to_string()));
        match spec {
            Ok(spec) => {
                sets.entry((
                    namespace,
                    spec.vpa_name.clone(),
                    spec.written_at.clone(),
                    spec.shards,
                ))
                .or_default()
                .insert(spec.shard, (name, spec));
            }
            Err(reason) => errors.push(CheckpointError::Invalid {
                object: name,
                reason,
            }),
        }
    }
    let mut newest: BTreeMap<(String, String), BTreeMap<usize, (String, Spec)>> = BTreeMap::new();
    // Ascending by writtenAt (RFC 3339 in UTC sorts as time), so the last
    // complete set of a VPA wins.
    for ((namespace, vpa, _, n), shards) in sets {
        if shards.len() == n && shards.keys().copied().eq(0..n) {
            newest.insert((namespace, vpa), shards);
        }
    }
    let mut history = History::default();
    for ((namespace, vpa), shards) in newest {
        match decode(config, shards) {
            Ok(decoded) => {
                let key: VpaKey = Arc::from(format!("{namespace}/{vpa}"));
                for (containers, pods) in decoded {
                    for (name, groups) in containers {
                        for (value, state) in groups {
                            let value = history.intern_value(&value);
                            history
                                .container_entry(&key, &name)
                                .groups
                                .insert(value, state);
                        }
                    }
                    for (pod, p) in pods {
                        history.restore_pod(
                            &key,
                            &format!("{namespace}/{pod}"),
                            &p.scope_value,
                            p.containers,
                        );
                    }
                }
            }
            Err(error) => errors.push(error),
        }
    }
    (history, errors)
}

type Decoded = (
    Vec<(String, Vec<(String, AggregateContainerState)>)>,
    BTreeMap<String, PodPayload>,
);

/// One VPA's shards, read and checked whole before any of it is used.
fn decode(
    config: &ModelConfig,
    shards: BTreeMap<usize, (String, Spec)>,
) -> Result<Vec<Decoded>, CheckpointError> {
    let mut out = Vec::with_capacity(shards.len());
    for (object, spec) in shards.into_values() {
        let invalid = |reason: String| CheckpointError::Invalid {
            object: object.clone(),
            reason,
        };
        let payload: Payload =
            serde_json::from_str(&spec.data).map_err(|e| invalid(format!("spec.data: {e}")))?;
        if payload.version != VERSION {
            return Err(invalid(format!(
                "spec.data: version {} (this recommender reads {VERSION})",
                payload.version
            )));
        }
        let mut containers = Vec::with_capacity(payload.containers.len());
        for (name, container) in payload.containers {
            let mut groups = Vec::with_capacity(container.groups.len());
            for (value, state) in &container.groups {
                let state = AggregateContainerState::from_checkpoint(&config.history, state)
                    .map_err(|source| CheckpointError::Histogram {
                        object: object.clone(),
                        source,
                    })?;
                groups.push((value.clone(), state));
            }
            containers.push((name, groups));
        }
        out.push((containers, payload.pods));
    }
    Ok(out)
}

#[cfg(test)]
#[path = "checkpoints_tests.rs"]
mod tests;
