//! The updater against a cluster: the store's watches (VPAs, LimitRanges,
//! Nodes, Features), its own watches of Pods and DaemonSets, one pass every
//! `--updater-interval` while this replica holds the Lease, and the writes
//! the pass decided: `pods/resize` (guarded by the pod's resourceVersion)
//! and `pods/eviction` (which honours PodDisruptionBudgets).

use super::act::{act, Bucket, Outcome};
use super::metrics::UpdaterMetrics;
use super::plan::{plan_pass, Memory};
use super::workloads::{DaemonSetInfo, Workloads};
use super::{Action, PodPlan, UpdateConfig};
use crate::json::text::ObjectText;
use crate::leader::{self, LeaseConfig};
use crate::pods::{read_watched, RunningPod};
use crate::store::Snapshot;
use arc_swap::ArcSwap;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How the updater runs against a cluster.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    /// What a pass decides with.
    pub update: UpdateConfig,
    /// `--updater-interval`.
    pub interval: Duration,
    /// The updater's own Lease.
    pub lease: LeaseConfig,
    /// This replica's identity (its pod name).
    pub instance: String,
    /// Evict only while the webhook's status Lease is fresh.
    pub use_admission_controller_status: bool,
    /// The webhook's status Lease: namespace, name.
    pub status_lease: (String, String),
    /// How old a renewal may be.
    pub status_lease_timeout: Duration,
    /// `--eviction-rate-limit` (per second; 0 or less: none) and
    /// `--eviction-rate-burst`.
    pub eviction_rate: (f64, u32),
    /// How many of a pass's writes are in flight at once (`--kube-api-burst`;
    /// the client's pace bounds their rate).
    pub in_flight: usize,
}

/// Why the loop could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The election could not begin.
    #[error(transparent)]
    Leader(#[from] leader::LeaderError),
}

type Shared = Arc<Mutex<Workloads>>;

fn lock(w: &Shared) -> MutexGuard<'_, Workloads> {
    // A panic while holding the lock leaves consistent data (each event is
    // applied whole), so a poisoned lock is taken as it is.
    w.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs until `shutdown`, then releases the Lease.
///
/// # Errors
/// When the election cannot start.
pub async fn run(
    client: Client,
    events: Client,
    config: LoopConfig,
    metrics: UpdaterMetrics,
    ready: Arc<std::sync::atomic::AtomicBool>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), ClusterError> {
    let snapshot: Arc<ArcSwap<Snapshot>> = Arc::default();
    let synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let snapshot = Arc::clone(&snapshot);
        let synced = Arc::clone(&synced);
        let kinds = crate::store::kube::default_kinds(None, &[]);
        tokio::spawn(crate::store::kube::run(
            client.clone(),
            kinds,
            crate::metrics::StoreMetrics::new("kube"),
            move |s| snapshot.store(s),
            move || synced.store(true, std::sync::atomic::Ordering::SeqCst),
        ));
    }
    let workloads: Shared = Arc::default();
    tokio::spawn(watch_pods(client.clone(), Arc::clone(&workloads)));
    tokio::spawn(watch_daemonsets(client.clone(), Arc::clone(&workloads)));
    let leadership = leader::elect(client.clone(), &config.lease, &config.instance).await?;
    let mut leading = leadership.leading();
    let events = super::events::Events::start(
        Recorder::new(
            events,
            Reporter {
                controller: "nodescope-updater".to_owned(),
                instance: Some(config.instance.clone()),
            },
        ),
        metrics.clone(),
    );
    let mut memory = Memory::default();
    let mut told = super::told::Told::default();
    let mut limiter = Bucket::new(config.eviction_rate);
    let mut ticker = tokio::time::interval(config.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut terminate = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut terminate => break,
            _ = ticker.tick() => {}
            changed = leading.changed() => {
                if changed.is_err() { break; }
            }
        }
        let is_leader = *leading.borrow();
        metrics.leader(is_leader);
        let is_synced = synced.load(std::sync::atomic::Ordering::SeqCst);
        ready.store(is_synced, std::sync::atomic::Ordering::SeqCst);
        if !is_leader || !is_synced {
            continue;
        }
        let started = Instant::now();
        let fresh = !config.use_admission_controller_status
            || webhook_fresh(&client, &config.status_lease, config.status_lease_timeout).await;
        metrics.webhook_fresh(fresh);
        let seen = snapshot.load_full();
        let plans = {
            let w = lock(&workloads);
            memory.retain_live(&w);
            plan_pass(
                &seen,
                &w,
                &config.update,
                &mut memory,
                fresh,
                Timestamp::now().as_second(),
            )
        };
        let planned = started.elapsed().as_secs_f64();
        metrics.step("plan", planned);
        let count = |a: Action| plans.iter().filter(|p| p.action == a).count();
        metrics.pass(
            plans.len(),
            count(Action::Resize),
            count(Action::Evict),
            count(Action::Deferred),
        );
        metrics.unusable(plans.iter().map(|p| p.unusable).sum());
        told.log(&plans);
        // The pass decided what may be disrupted (at most the tolerance of
        // each DaemonSet); its writes go concurrently, each guarded by the
        // pod's resourceVersion, at the client's pace. Eviction tokens are
        // taken in the pass's order first, so the limit keeps the most
        // urgent evictions.
        let wanted = plans
            .iter()
            .filter(|p| p.action.acts())
            .map(|p| (p.namespace.clone(), p.vpa.clone()))
            .collect();
        let current = current_vpas(&client, wanted, &seen).await;
        let acts: Vec<&PodPlan> = plans
            .iter()
            .filter(|p| p.action.acts())
            .filter(|p| current.contains(&(p.namespace.clone(), p.vpa.clone())))
            .filter(|p| {
                p.action != Action::Evict || limiter.take() || {
                    tracing::info!(pod = %format!("{}/{}", p.namespace, p.pod), "eviction rate limit reached; next pass");
                    false
                }
            })
            .collect();
        let leading_now = || *leading.borrow();
        let outcomes: Vec<Outcome> = futures::stream::iter(acts)
            .map(|plan| {
                let (client, events, metrics) = (&client, &events, &metrics);
                async move {
                    if !leading_now() {
                        // Lost the Lease during the pass: the new leader decides.
                        return Outcome::Nothing;
                    }
                    act(client, events, plan, metrics).await
                }
            })
            .buffer_unordered(config.in_flight.max(1))
            .collect()
            .await;
        for outcome in outcomes {
            outcome.remember(&mut memory);
        }
        metrics.step("act", started.elapsed().as_secs_f64() - planned);
        metrics.step("total", started.elapsed().as_secs_f64());
    }
    if let Err(error) = leadership.release().await {
        tracing::warn!(%error, "Lease not released; it expires on its own");
    }
    Ok(())
}

/// The VPAs of this pass's writes that the apiserver still holds at the
/// resourceVersion the pass decided with: one metadata-only GET each. A
/// pass decides from watches, and a watch cut and reconnecting can leave
/// the VPAs behind while the pods are current: a pod the webhook just
/// sized from the new recommendation was then resized to the old one, and
/// back a pass later (the system suite's fault 6 at N = 1,000). A VPA that
/// moved, or could not be read, waits for the next pass; its pods are
/// disrupted by nothing this pass decided from an old recommendation.
pub(super) async fn current_vpas(
    client: &Client,
    wanted: std::collections::BTreeSet<(Arc<str>, Arc<str>)>,
    seen: &Snapshot,
) -> std::collections::HashSet<(Arc<str>, Arc<str>)> {
    let mut current = std::collections::HashSet::new();
    for (namespace, name) in wanted {
        let Some(decided) = seen.vpa_resource_version(&namespace, &name) else {
            continue;
        };
        let api: Api<crate::vpa::crd::VerticalPodAutoscaler> =
            Api::namespaced(client.clone(), &namespace);
        match api.get_metadata_opt(&name).await {
            Ok(Some(live)) if live.metadata.resource_version.as_deref() == Some(decided) => {
                current.insert((namespace, name));
            }
            Ok(Some(live)) => tracing::info!(
                vpa = %format!("{namespace}/{name}"),
                decided,
                live = live.metadata.resource_version.as_deref().unwrap_or_default(),
                "the VPA changed since the watch last saw it: its pods wait for the next pass"
            ),
            Ok(None) => {
                tracing::info!(vpa = %format!("{namespace}/{name}"), "the VPA is gone: its pods are left alone")
            }
            Err(error) => {
                tracing::warn!(vpa = %format!("{namespace}/{name}"), %error, "the VPA was not read: its pods wait for the next pass")
            }
        }
    }
    current
}

/// Whether the webhook renewed its status Lease within `timeout`.
pub async fn webhook_fresh(
    client: &Client,
    (namespace, name): &(String, String),
    timeout: Duration,
) -> bool {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(name).await {
        Ok(Some(lease)) => {
            let renewed = crate::leader::status::renew_time(&lease);
            let fresh = crate::leader::status::lease_is_fresh(
                renewed,
                std::time::SystemTime::now(),
                timeout,
            );
            if !fresh {
                let renewed = lease.spec.and_then(|s| s.renew_time).map(|t| t.0);
                tracing::warn!(lease = %format!("{namespace}/{name}"), renewed = ?renewed, "nodescope's webhook status Lease is stale: no evictions this pass");
            }
            fresh
        }
        Ok(None) => {
            tracing::warn!(lease = %format!("{namespace}/{name}"), "nodescope's webhook status Lease does not exist: no evictions");
            false
        }
        Err(error) => {
            tracing::warn!(%error, "webhook status Lease not read: no evictions this pass");
            false
        }
    }
}

/// A watched pod as the updater keeps it: `Ok(None)` for a pod no apps/v1
/// DaemonSet controls, the only pods a pass decides on
/// ([`Workloads::by_daemonset`]). The others (26 of 30 per node in a large
/// cluster) are dropped at the watch, so the updater holds a pod per
/// DaemonSet per node, not every pod. A pod is read from its text
/// ([`read_watched`]).
fn daemonset_pod(object: &ObjectText) -> Result<Option<RunningPod>, String> {
    let pod = read_watched(object, |pod| pod.daemonset().is_some())?;
    Ok(pod.filter(|pod| pod.daemonset.is_some()))
}

async fn watch_pods(client: Client, workloads: Shared) {
    // Pages and events as text (`ObjectText`): no whole Pod is built.
    let api: Api<ObjectText> = Api::all_with(client, &ApiResource::erase::<Pod>(&()));
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut fresh = Workloads::default();
    while let Some(event) = events.next().await {
        let key = |pod: &ObjectText| format!("{}/{}", pod.namespace(), pod.name());
        match event {
            Ok(WatchEvent::Init) => fresh = Workloads::default(),
            Ok(WatchEvent::InitApply(pod)) => match daemonset_pod(&pod) {
                Ok(Some(p)) => fresh.put_pod(p),
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "pod left out"),
            },
            Ok(WatchEvent::InitDone) => {
                let mut w = lock(&workloads);
                w.pods = std::mem::take(&mut fresh.pods);
            }
            Ok(WatchEvent::Apply(pod)) => match daemonset_pod(&pod) {
                Ok(Some(p)) => lock(&workloads).put_pod(p),
                // Orphaned, or never a DaemonSet's: nothing the updater sizes.
                Ok(None) => {
                    lock(&workloads).pods.remove(&key(&pod));
                }
                Err(error) => tracing::warn!(%error, "pod left out"),
            },
            Ok(WatchEvent::Delete(pod)) => {
                lock(&workloads).pods.remove(&key(&pod));
            }
            Err(error) => tracing::warn!(%error, "pod watch failed; retrying"),
        }
    }
}

async fn watch_daemonsets(client: Client, workloads: Shared) {
    let api: Api<ObjectText> = Api::all_with(client, &ApiResource::erase::<DaemonSet>(&()));
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut fresh = std::collections::HashMap::new();
    while let Some(event) = events.next().await {
        let read = |ds: &ObjectText| {
            serde_json::from_str::<serde_json::Value>(ds.text())
                .map_err(|e| format!("DaemonSet {}/{}: {e}", ds.namespace(), ds.name()))
                .and_then(|v| DaemonSetInfo::from_value(&v))
        };
        match event {
            Ok(WatchEvent::Init) => fresh.clear(),
            Ok(WatchEvent::InitApply(ds)) => match read(&ds) {
                Ok((key, info)) => {
                    fresh.insert(key, info);
                }
                Err(error) => tracing::warn!(%error, "DaemonSet left out"),
            },
            Ok(WatchEvent::InitDone) => lock(&workloads).daemonsets = std::mem::take(&mut fresh),
            Ok(WatchEvent::Apply(ds)) => match read(&ds) {
                Ok((key, info)) => {
                    lock(&workloads).daemonsets.insert(key, info);
                }
                Err(error) => tracing::warn!(%error, "DaemonSet left out"),
            },
            Ok(WatchEvent::Delete(ds)) => {
                let key = (ds.namespace().to_owned(), ds.name().to_owned());
                lock(&workloads).daemonsets.remove(&key);
            }
            Err(error) => tracing::warn!(%error, "DaemonSet watch failed; retrying"),
        }
    }
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
