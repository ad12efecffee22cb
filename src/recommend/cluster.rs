//! The recommender against a cluster: the thin edge around
//! [`History::observe`] and [`vpa_status`]. Every interval the leader lists
//! VPAs and PodMetrics, takes pods and node labels from its watches,
//! computes, and writes each VPA's status that [`needs_write`] (with a JSON
//! patch that first tests the resourceVersion it read, so a concurrent
//! change fails the write instead of being overwritten); every checkpoint
//! interval it applies its checkpoints (server-side apply, one field
//! manager). A follower only waits: on becoming leader it reads the
//! checkpoints the last leader left and goes on from there.

use super::api::{apply_checkpoint, read_scope_gate, read_usage, read_vpas, write_status};
use super::checkpoint_dir;
use super::checkpoints::{self as checkpoint, KIND};
use super::input::{object_value, ScopedVpa};
use super::model::History;
use super::replay::Replay;
use super::status::{keep_groups, needs_write, vpa_status, VpaStatus};
use super::upstream_cluster;
use super::watch::{lock, NodeWatch, PodWatches, Shared};
use crate::leader::{self, LeaseConfig};
use crate::metrics::RecommenderMetrics;
use crate::store::presence;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use kube::Client;
use serde_json::Value;
use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where usage comes from.
#[derive(Clone, Debug)]
pub enum MetricsSource {
    /// `metrics.k8s.io/v1beta1` PodMetrics, listed once an interval.
    Api,
    /// Recorded intervals (`--metrics file:`), one taken each interval, in
    /// timestamp order, read a group of files at a time; when they run
    /// out, as an outage of the API.
    Recorded(super::recording::Replayed),
}

/// Which checkpoints the leader writes (`--checkpoints`). Either way it
/// first reads its own and imports upstream's for VPAs that have none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CheckpointFormat {
    /// `RecommendationCheckpoint` shards, exact.
    #[default]
    Nodescope,
    /// upstream's `VerticalPodAutoscalerCheckpoint`s ([`super::upstream`]).
    Upstream,
}

/// How the loop runs.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    pub metrics: MetricsSource,
    pub replay: Replay,
    /// `--recommender-interval`.
    pub interval: Duration,
    /// How often the history is checkpointed (and once more on shutdown).
    pub checkpoint_interval: Duration,
    pub checkpoints: CheckpointFormat,
    pub lease: LeaseConfig,
    /// This replica (the pod name): the Lease holder's identity.
    pub instance: String,
}

/// Why the loop could not start or went on without a step.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Leader(#[from] leader::LeaderError),
    #[error("listing {what}: {source}")]
    List {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Checkpoint(#[from] checkpoint::CheckpointError),
    #[error("the recorded metrics (--metrics file:) have all been replayed")]
    Recorded,
    #[error("the recorded metrics (--metrics file:): {0}")]
    Replay(#[from] super::replay::ReplayError),
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    let api_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version,
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub(super) fn vpa_resource() -> ApiResource {
    resource(
        "autoscaling.k8s.io",
        "v1",
        "VerticalPodAutoscaler",
        "verticalpodautoscalers",
    )
}

fn checkpoint_resource() -> ApiResource {
    resource(
        "nodescope.dev",
        "v1alpha1",
        KIND,
        "recommendationcheckpoints",
    )
}

/// The history the last leader checkpointed: its own checkpoints (unless
/// it writes upstream's, so that stale ones never win), then upstream's for
/// every VPA that has none.
async fn restore(
    client: &Client,
    replay: &Replay,
    format: CheckpointFormat,
) -> Result<History, ClusterError> {
    let mut history = History::default();
    if format == CheckpointFormat::Nodescope {
        history = restore_own(client, replay).await?;
    }
    // The import is a courtesy: a cluster where it cannot be read (RBAC of
    // an older install) still gets its recommendations.
    match upstream_cluster::read(client).await {
        Ok(upstream) => upstream_cluster::import(&replay.model.history, &mut history, &upstream),
        Err(error) => tracing::warn!(
            %error,
            "upstream's VerticalPodAutoscalerCheckpoints not read: nothing imported"
        ),
    }
    // The history of a VPA in a namespace this recommender does not handle
    // is another recommender's: continuing it here would write it back
    // over that recommender's newer checkpoints.
    checkpoint::forget_unscoped(&mut history, |key| {
        key.split_once('/')
            .is_some_and(|(namespace, _)| replay.namespaces.handles(namespace))
    });
    Ok(history)
}

const CHECKPOINTS: &str = "recommendationcheckpoints.nodescope.dev";

async fn restore_own(client: &Client, replay: &Replay) -> Result<History, ClusterError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &checkpoint_resource());
    let list = match api.list(&ListParams::default()).await {
        Ok(list) => list,
        // No checkpoint CRD: no history kept, the model starts afresh.
        Err(error) if presence::is_not_served(&error) => {
            presence::note(CHECKPOINTS, false);
            return Ok(History::default());
        }
        Err(source) => {
            return Err(ClusterError::List {
                what: CHECKPOINTS,
                source,
            })
        }
    };
    presence::note(CHECKPOINTS, true);
    // Another recommender's checkpoints are its own to read and to write.
    let objects: Vec<Value> = list
        .items
        .iter()
        .map(|o| object_value(o, KIND))
        .filter(|o| checkpoint_dir::belongs_to(o, &replay.recommender_name))
        .collect();
    let (history, errors) = checkpoint::restore_each(&replay.model, &objects);
    for error in errors {
        tracing::warn!(%error, "checkpoint not read: that VPA's history starts afresh");
    }
    Ok(history)
}

/// Applies every checkpoint object, VPA by VPA (each encoded under the
/// model's lock, written after it), labelled as this recommender's, then
/// deletes this recommender's own that this write did not produce (a VPA
/// gone or no longer its, or fewer shards than before). Another
/// recommender's checkpoints, and those an older nodescope wrote without a
/// recommender's name, are never deleted here.
async fn write_checkpoints(
    client: &Client,
    config: &LoopConfig,
    history: &Shared,
    now: Timestamp,
    metrics: &RecommenderMetrics,
) -> Result<(), ClusterError> {
    if config.checkpoints == CheckpointFormat::Upstream {
        upstream_cluster::write(client, history, &config.replay.model.history, now, metrics).await;
        return Ok(());
    }
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &checkpoint_resource());
    let recommender = config.replay.recommender_name.as_str();
    let selector = format!(
        "{}={},{}={recommender}",
        checkpoint_dir::OWNER_LABEL,
        checkpoint_dir::OWNER,
        checkpoint_dir::RECOMMENDER_LABEL
    );
    let existing = match api.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => list,
        // No checkpoint CRD: nothing to write to, said once.
        Err(error) if presence::is_not_served(&error) => {
            presence::note(CHECKPOINTS, false);
            return Ok(());
        }
        Err(source) => {
            return Err(ClusterError::List {
                what: CHECKPOINTS,
                source,
            })
        }
    };
    presence::note(CHECKPOINTS, true);
    let written_at = now.to_string();
    let mut written = HashSet::new();
    let vpas = checkpoint::vpas(&lock(history));
    for vpa in vpas {
        let objects = checkpoint::of_vpa(&lock(history), &vpa, &written_at)?;
        for object in &objects {
            let object = checkpoint_dir::owned(object, recommender);
            written
                .insert(apply_checkpoint(client, &checkpoint_resource(), &object, metrics).await);
        }
    }
    for object in existing.items {
        let ns = object.metadata.namespace.clone().unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        // Another namespace's checkpoints are another recommender's.
        if !written.contains(&(ns.clone(), name.clone())) && config.replay.namespaces.handles(&ns) {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &ns, &checkpoint_resource());
            if let Err(error) = api.delete(&name, &DeleteParams::default()).await {
                tracing::warn!(namespace = %ns, %name, %error, "stale checkpoint not deleted");
            }
        }
    }
    Ok(())
}

/// One interval: read, compute (under the model's lock), write the
/// statuses that changed (after it). Returns whether usage could be read
/// (an outage keeps the last statuses).
#[allow(clippy::too_many_arguments)] // the loop's state, passed down once
async fn interval(
    client: &Client,
    config: &mut LoopConfig,
    gate: &mut Option<String>,
    history: &Shared,
    pending: &mut Option<History>,
    pods: &mut PodWatches,
    nodes: &NodeWatch,
    metrics: &RecommenderMetrics,
) -> Result<bool, ClusterError> {
    read_scope_gate(client, gate).await;
    let listed = read_vpas(client, &config.replay).await?;
    let vpas = listed.computed;
    let namespaces: BTreeSet<&str> = vpas.iter().map(|(v, _)| v.namespace.as_str()).collect();
    let namespaces: Vec<&str> = namespaces.into_iter().collect();
    pods.watch(client, &namespaces);
    if !pods.synced() || !nodes.synced() {
        tracing::info!("waiting for the pod and node watches to list once");
        return Ok(true);
    }
    let read = match &mut config.metrics {
        MetricsSource::Api => read_usage(client, &namespaces).await,
        MetricsSource::Recorded(intervals) => match intervals.next_interval() {
            Some(Ok((_, usage))) => Ok(usage),
            Some(Err(error)) => Err(error.into()),
            None => Err(ClusterError::Recorded),
        },
    };
    let usage = match read {
        Ok(usage) => usage,
        Err(error) => {
            metrics.recommender_metrics_source(false);
            tracing::warn!(%error, "metrics unavailable: keeping the last recommendations");
            return Ok(false);
        }
    };
    metrics.recommender_metrics_source(true);
    let now = usage
        .iter()
        .map(|u| u.timestamp)
        .max()
        .unwrap_or_else(Timestamp::now);
    let scoped: Vec<ScopedVpa> = vpas.iter().map(|(v, _)| v.clone()).collect();
    let writes: Vec<(&ScopedVpa, &String, VpaStatus)> = {
        let mut model = lock(history);
        // The checkpointed windows attach to the pods the watch knows, so
        // they are taken once the watches have listed.
        if let Some(checkpointed) = pending.take() {
            model.adopt(checkpointed);
            tracing::info!(
                keys = model.keys(),
                pods = model.pods.len(),
                "history restored from checkpoints"
            );
        }
        // A VPA gone, or no longer this recommender's, keeps no history: its
        // checkpoints go with the next checkpoint write.
        checkpoint::forget_unscoped(&mut model, |key| listed.owned.contains(key));
        if gate.as_deref() == Some("Off") {
            // Off: a VPA no longer scoped keeps no group history, so its
            // checkpoints go with the next checkpoint write.
            let scoped_keys: HashSet<String> = scoped
                .iter()
                .map(|v| format!("{}/{}", v.namespace, v.name))
                .collect();
            checkpoint::forget_unscoped(&mut model, |key| scoped_keys.contains(key));
        }
        let ingested = model.observe(&config.replay.model, &scoped, &*nodes.labels(), &usage, now);
        metrics.recommender_ingested(ingested.samples, ingested.dropped, model.keys());
        let counts = model.pod_counts();
        let mut too_large = 0;
        let writes = vpas
            .iter()
            .filter_map(|(vpa, resource_version)| {
                let key = format!("{}/{}", vpa.namespace, vpa.name);
                let mut status = vpa_status(
                    &config.replay.status,
                    &config.replay.model.history,
                    vpa,
                    model.vpas.get(key.as_str()),
                    counts.get(key.as_str()).copied().unwrap_or(0),
                    now,
                );
                if gate.is_some() {
                    keep_groups(vpa.status.as_ref(), &mut status);
                }
                too_large += usize::from(status.groups_too_large());
                needs_write(vpa.status.as_ref(), &status).then_some((vpa, resource_version, status))
            })
            .collect();
        metrics.recommender_groups_too_large(too_large);
        writes
    };
    for (vpa, resource_version, status) in writes {
        match write_status(client, vpa, resource_version, &status).await {
            Ok(()) => metrics.recommendation_write(true),
            Err(error) => {
                metrics.recommendation_write(false);
                tracing::warn!(vpa = %format!("{}/{}", vpa.namespace, vpa.name), %error, "status not written; the next interval re-reads the VPA");
            }
        }
    }
    Ok(true)
}

/// Runs until SIGTERM: competes for the Lease; while leading, an interval
/// every `config.interval` and a checkpoint every
/// `config.checkpoint_interval`; on SIGTERM a last checkpoint by the leader,
/// then the Lease is released.
///
/// `shutdown` resolves on SIGTERM (the binary's edge owns signals).
///
/// # Errors
/// When the Lease cannot be read or created at start.
pub async fn run(
    client: Client,
    mut config: LoopConfig,
    metrics: RecommenderMetrics,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), ClusterError> {
    let leadership = leader::elect(client.clone(), &config.lease, &config.instance).await?;
    let _export = leadership.export(metrics.leader());
    let mut leading = leadership.leading();
    let nodes = NodeWatch::start(&client);
    let history: Shared = Arc::new(Mutex::new(History::default()));
    let mut pods = PodWatches::new(Arc::clone(&history));
    // Whether the model holds the history (restored from checkpoints since
    // this replica began to lead).
    let mut restored = false;
    let mut pending: Option<History> = None;
    let mut ticker = tokio::time::interval(config.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_checkpoint = tokio::time::Instant::now();
    let mut gate: Option<String> = None;
    let mut terminate = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut terminate => break,
            _ = ticker.tick() => {}
            changed = leading.changed() => {
                if changed.is_err() { break; }
                continue;
            }
        }
        if !*leading.borrow() {
            if restored {
                lock(&history).forget();
                pending = None;
                restored = false;
                tracing::info!(lease = %config.lease.lease(), "lost the Lease: history dropped, the new leader goes on from the checkpoints");
            }
            continue;
        }
        if !restored {
            match restore(&client, &config.replay, config.checkpoints).await {
                Ok(checkpointed) => {
                    tracing::info!(keys = checkpointed.keys(), "leading: checkpoints read");
                    pending = Some(checkpointed);
                    restored = true;
                    last_checkpoint = tokio::time::Instant::now();
                }
                Err(error) => {
                    tracing::warn!(%error, "checkpoints not read; retrying next interval");
                    continue;
                }
            }
        }
        if let Err(error) = interval(
            &client,
            &mut config,
            &mut gate,
            &history,
            &mut pending,
            &mut pods,
            &nodes,
            &metrics,
        )
        .await
        {
            tracing::warn!(%error, "interval failed; retrying next interval");
        }
        // Not before the checkpoints read are adopted: a write of the empty
        // model would delete them.
        if last_checkpoint.elapsed() >= config.checkpoint_interval
            && pending.is_none()
            && *leading.borrow()
        {
            if let Err(error) =
                write_checkpoints(&client, &config, &history, Timestamp::now(), &metrics).await
            {
                tracing::warn!(%error, "checkpoints not written");
            }
            last_checkpoint = tokio::time::Instant::now();
        }
    }
    if restored && pending.is_none() && *leading.borrow() {
        if let Err(error) =
            write_checkpoints(&client, &config, &history, Timestamp::now(), &metrics).await
        {
            tracing::warn!(%error, "last checkpoints not written");
        }
    }
    if let Err(error) = leadership.release().await {
        tracing::warn!(%error, "Lease not released; it expires on its own");
    }
    Ok(())
}
