//! The recommender without a cluster: VPAs, Pods and Nodes from store files,
//! recorded `PodMetricsList`s from a metrics directory, replayed in
//! timestamp order through the same model and status code the cluster loop
//! runs, optionally continuing from (and leaving) checkpoint files.

use super::checkpoint_dir::{self, CheckpointDir};
use super::checkpoints::{self as checkpoint, CheckpointError};
use super::input::{InputError, NodeIndex, PodUsage, ScopedVpa, TrackedPod};
use super::model::{History, Ingested, ModelConfig};
use super::status::{vpa_status, StatusConfig};
use super::upstream;
use super::usage::PodMetricsDoc;
use crate::manifest::{self, ManifestError};
use crate::vpa::namespaces::VpaNamespaces;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use std::path::Path;

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("{source_file}: {error}")]
    Input {
        source_file: String,
        error: InputError,
    },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("{0}: no PodMetrics in it (expected metrics.k8s.io/v1beta1 PodMetricsList files)")]
    NoMetrics(String),
    #[error(transparent)]
    CheckpointDir(#[from] checkpoint_dir::DirError),
}

/// The cluster as the store files describe it, read by
/// [`crate::input::cluster::recommender_cluster`].
#[derive(Debug, Default)]
pub struct Cluster {
    /// Every VPA, in file order (scoped ones are recommended, others kept
    /// for the output unchanged).
    pub vpas: Vec<(Value, Option<ScopedVpa>)>,
    pub pods: Vec<TrackedPod>,
    pub nodes: NodeIndex,
}

impl Cluster {
    /// The scoped VPAs `replay` computes.
    #[must_use]
    pub fn scoped(&self, replay: &Replay) -> Vec<ScopedVpa> {
        self.vpas
            .iter()
            .filter_map(|(_, s)| s.clone())
            .filter(|s| replay.computes(s))
            .collect()
    }
}

/// Every PodMetrics under `path`, as intervals: the items of each distinct
/// timestamp together, in timestamp order (files may hold one interval each,
/// or several).
///
/// # Errors
/// An unreadable file or item, or no PodMetrics at all.
pub fn load_metrics(path: &Path) -> Result<Vec<(Timestamp, Vec<PodUsage>)>, ReplayError> {
    let items = usage_under(path)?;
    if items.is_empty() {
        return Err(ReplayError::NoMetrics(path.display().to_string()));
    }
    Ok(intervals(items))
}

/// The usage of every PodMetrics under `path` (a file or a directory), in
/// file order, read a file at a time.
///
/// # Errors
/// An unreadable file or item.
pub fn usage_under(path: &Path) -> Result<Vec<PodUsage>, ReplayError> {
    let mut items = Vec::new();
    for file in manifest::collect_files(path, &[])? {
        items.extend(usage_of_file(&file)?);
    }
    Ok(items)
}

/// One file's PodMetrics. A JSON list is read item by item straight into
/// [`PodUsage`]: a recording of 20 intervals of 3,000 pods read as `Value`
/// trees peaked at 300 MiB in the recommender (issue 43). Anything else (a
/// single object, YAML, an item that cannot be read) is read whole, which
/// names the bad item and field.
fn usage_of_file(file: &Path) -> Result<Vec<PodUsage>, ReplayError> {
    let name = file.display().to_string();
    let io = |source| ManifestError::Io {
        path: name.clone(),
        source,
    };
    let reader = std::io::BufReader::new(std::fs::File::open(file).map_err(io)?);
    let mut items = Vec::new();
    let complete = manifest::stream_json_list_items(reader, |head, text| {
        let Ok(doc) = serde_json::from_str::<PodMetricsDoc>(text) else {
            return false;
        };
        let metrics = match (head.kind.as_deref(), doc.kind()) {
            (Some("PodMetricsList"), _) | (Some("List") | None, Some("PodMetrics")) => true,
            // Before the list said what it is, an item without a kind
            // could be a PodMetrics: only the whole read knows.
            (None, None) => return false,
            _ => false,
        };
        if !metrics {
            return true;
        }
        match PodUsage::from_doc(doc) {
            Ok(usage) => {
                items.push(usage);
                true
            }
            Err(_) => false,
        }
    })
    .map_err(io)?;
    if complete {
        return Ok(items);
    }
    drop(items);
    let mut items = Vec::new();
    for doc in manifest::read_path(file, &[])? {
        let input = |error| ReplayError::Input {
            source_file: doc.source.clone(),
            error,
        };
        match doc.value.get("kind").and_then(Value::as_str) {
            Some("PodMetricsList") => {
                for item in doc
                    .value
                    .get("items")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    items.push(PodUsage::from_value(item).map_err(input)?);
                }
            }
            Some("PodMetrics") => items.push(PodUsage::from_value(&doc.value).map_err(input)?),
            _ => {}
        }
    }
    Ok(items)
}

/// Groups usage by timestamp, in order; stable within a timestamp.
#[must_use]
pub fn intervals(mut items: Vec<PodUsage>) -> Vec<(Timestamp, Vec<PodUsage>)> {
    items.sort_by_key(|u| u.timestamp);
    let mut out: Vec<(Timestamp, Vec<PodUsage>)> = Vec::new();
    for item in items {
        match out.last_mut() {
            Some((at, list)) if *at == item.timestamp => list.push(item),
            _ => out.push((item.timestamp, vec![item])),
        }
    }
    out
}

/// Everything a replay needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    pub model: ModelConfig,
    pub status: StatusConfig,
    /// `--recommender-name`.
    pub recommender_name: String,
    /// `--vpa-object-namespace`, `--ignored-vpa-object-namespaces`.
    pub namespaces: VpaNamespaces,
}

/// What a replay produced.
#[derive(Debug)]
pub struct Outcome {
    /// Every VPA of the store, scoped ones with the status written.
    pub vpas: Vec<Value>,
    pub history: History,
    pub ingested: Ingested,
    pub intervals: usize,
}

impl Replay {
    /// Upstream's defaults for every number (`nodescope recommend` with no
    /// flags).
    #[must_use]
    pub fn defaults() -> Self {
        const DAY_MS: i64 = 24 * 3_600_000;
        Replay {
            model: ModelConfig {
                history: super::aggregate::HistoryConfig::default(),
                peaks: super::container::PeakConfig {
                    interval_ms: DAY_MS,
                    oom_bump_up_ratio: 1.2,
                    oom_min_bump_up_bytes: 100.0 * 1024.0 * 1024.0,
                },
                window_length_ms: 8 * DAY_MS,
                interval_count: 8,
                per_vpa_config: false,
            },
            status: StatusConfig {
                recommender: super::estimate::RecommenderConfig::default(),
                round_cpu_millicores: 1,
                round_memory_bytes: 1,
                max_allowed_cpu: None,
                max_allowed_memory: None,
                group_min_samples: 1,
                status_limit: super::fit::STATUS_LIMIT,
            },
            recommender_name: "default".to_owned(),
            namespaces: VpaNamespaces::All,
        }
    }

    /// Whether this recommender computes `vpa`: it names this recommender
    /// (or none, for `default`) and lies in a namespace it handles. Any
    /// other VPA is left as it is, for the recommender that owns it.
    #[must_use]
    pub fn computes(&self, vpa: &ScopedVpa) -> bool {
        vpa.is_for(&self.recommender_name) && self.namespaces.handles(&vpa.namespace)
    }

    /// The key (`namespace/name`) of VPA `object` when this recommender owns
    /// it, scoped or not: it names this recommender in `spec.recommenders`
    /// (or none, for `default`) and lies in a namespace it handles. Only
    /// the history of such VPAs is kept and checkpointed; a VPA gone, or
    /// another recommender's, has its checkpoints removed by their writer.
    #[must_use]
    pub fn owns(&self, object: &Value) -> Option<String> {
        let namespace = object.pointer("/metadata/namespace")?.as_str()?;
        let name = object.pointer("/metadata/name")?.as_str()?;
        let names: Vec<&str> = object
            .pointer("/spec/recommenders")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("name").and_then(Value::as_str))
            .collect();
        let mine = if names.is_empty() {
            self.recommender_name == checkpoint_dir::DEFAULT_RECOMMENDER
        } else {
            names.contains(&self.recommender_name.as_str())
        };
        (mine && self.namespaces.handles(namespace)).then(|| format!("{namespace}/{name}"))
    }

    /// Runs `intervals` (in timestamp order; taken one at a time, so they
    /// may be read as they go, [`super::recording`]) over `history` and
    /// gives every VPA with the status this recommender would write at the
    /// last interval.
    #[must_use]
    pub fn run(
        &self,
        cluster: &Cluster,
        mut history: History,
        intervals: impl IntoIterator<Item = (Timestamp, Vec<PodUsage>)>,
    ) -> Outcome {
        let scoped = cluster.scoped(self);
        for pod in &cluster.pods {
            history.upsert_pod(pod);
        }
        let mut ingested = Ingested::default();
        let mut now = Timestamp::UNIX_EPOCH;
        let mut count = 0;
        for (at, usage) in intervals {
            count += 1;
            let i = history.observe(&self.model, &scoped, &cluster.nodes, &usage, at);
            ingested.samples += i.samples;
            ingested.dropped += i.dropped;
            ingested.ooms += i.ooms;
            now = at;
        }
        // Only the VPAs of the store that are this recommender's keep their
        // history (and so their checkpoints).
        let owned: std::collections::HashSet<String> = cluster
            .vpas
            .iter()
            .filter_map(|(v, _)| self.owns(v))
            .collect();
        checkpoint::forget_unscoped(&mut history, |key| owned.contains(key));
        let counts = history.pod_counts();
        let vpas = cluster
            .vpas
            .iter()
            .map(|(object, s)| {
                let Some(vpa) = s.as_ref().filter(|v| self.computes(v)) else {
                    return object.clone();
                };
                let key = format!("{}/{}", vpa.namespace, vpa.name);
                let status = vpa_status(
                    &self.status,
                    &self.model.history,
                    vpa,
                    history.vpas.get(key.as_str()),
                    counts.get(key.as_str()).copied().unwrap_or(0),
                    now,
                );
                let mut object = object.clone();
                if let Some(map) = object.as_object_mut() {
                    map.insert("status".into(), status.to_value());
                }
                object
            })
            .collect();
        Outcome {
            vpas,
            history,
            ingested,
            intervals: count,
        }
    }

    /// The model from the checkpoints a directory holds (nodescope's and
    /// upstream's; none: empty).
    ///
    /// # Errors
    /// A checkpoint that cannot be read.
    pub fn restore(&self, dir: &CheckpointDir) -> Result<History, ReplayError> {
        let of_kind = |kind: &str| -> Vec<Value> {
            dir.objects
                .iter()
                .filter(|v| v.get("kind").and_then(Value::as_str) == Some(kind))
                .cloned()
                .collect()
        };
        let mut history = checkpoint::restore(&self.model, &of_kind(checkpoint::KIND))?;
        let (imported, mut errors) =
            upstream::restore(&self.model.history, &of_kind(upstream::KIND));
        if !errors.is_empty() {
            return Err(errors.remove(0).into());
        }
        upstream::import(&mut history, imported);
        Ok(history)
    }
}

/// Replaces recommender `recommender`'s checkpoint files in `dir` (as read
/// in `before`) with `history`'s, one JSON file per object
/// ([`checkpoint_dir::replace`]).
///
/// # Errors
/// A file name taken by another's file, or the directory cannot be written.
pub fn write_checkpoints(
    dir: &Path,
    before: &CheckpointDir,
    history: &History,
    at: Timestamp,
    recommender: &str,
) -> Result<usize, ReplayError> {
    let objects = checkpoint::checkpoints(history, &at.to_string())?;
    Ok(checkpoint_dir::replace(dir, before, &objects, recommender)?)
}

/// As [`write_checkpoints`], in upstream's format
/// (`VerticalPodAutoscalerCheckpoint` objects, [`upstream`]).
///
/// # Errors
/// A file name taken by another's file, or the directory cannot be written.
pub fn write_upstream_checkpoints(
    dir: &Path,
    before: &CheckpointDir,
    config: &super::aggregate::HistoryConfig,
    history: &History,
    at: Timestamp,
    recommender: &str,
) -> Result<usize, ReplayError> {
    let objects: Vec<Value> = checkpoint::vpas(history)
        .iter()
        .flat_map(|vpa| upstream::of_vpa(config, history, vpa, at))
        .collect();
    Ok(checkpoint_dir::replace(dir, before, &objects, recommender)?)
}
