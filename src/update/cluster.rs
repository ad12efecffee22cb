//! The updater against a cluster: the store's watches (VPAs, LimitRanges,
//! Nodes, Features), its own watches of Pods and DaemonSets, one pass every
//! `--updater-interval` while this replica holds the Lease, and the writes
//! the pass decided: `pods/resize` (guarded by the pod's resourceVersion)
//! and `pods/eviction` (which honours PodDisruptionBudgets).

use super::metrics::UpdaterMetrics;
use super::plan::{plan_pass, requested, Memory};
use super::workloads::{DaemonSetInfo, Workloads};
use super::{Action, PodPlan, UpdateConfig};
use crate::leader::{self, LeaseConfig};
use crate::pods::{evict, resize, ResizeError, RunningPod};
use crate::store::Snapshot;
use arc_swap::ArcSwap;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
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
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "nodescope-updater".to_owned(),
            instance: Some(config.instance.clone()),
        },
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
        let plans = {
            let w = lock(&workloads);
            memory.retain_live(&w);
            plan_pass(
                &snapshot.load(),
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
        let acts: Vec<&PodPlan> = plans
            .iter()
            .filter(|p| p.action.acts())
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
                let (client, recorder, metrics) = (&client, &recorder, &metrics);
                async move {
                    if !leading_now() {
                        // Lost the Lease during the pass: the new leader decides.
                        return Outcome::Nothing;
                    }
                    act(client, recorder, plan, metrics).await
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

/// What a write leaves for the next passes to remember.
enum Outcome {
    Nothing,
    /// Resized at this second: how long its resize is pending counts from it.
    Resized {
        key: String,
        at: i64,
    },
    /// Refused as Infeasible: what it asked, so a no-lower ask waits.
    Infeasible {
        uid: String,
        asked: Vec<(String, crate::vpa::ResourceList)>,
    },
}

impl Outcome {
    fn remember(self, memory: &mut Memory) {
        match self {
            Outcome::Nothing => {}
            Outcome::Resized { key, at } => {
                memory.resizing_since.insert(key, at);
            }
            Outcome::Infeasible { uid, asked } => {
                memory.infeasible.insert(uid, asked);
            }
        }
    }
}

async fn act(
    client: &Client,
    recorder: &Recorder,
    plan: &PodPlan,
    metrics: &UpdaterMetrics,
) -> Outcome {
    let key = format!("{}/{}", plan.namespace, plan.pod);
    let pod_ref = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(plan.namespace.to_string()),
        name: Some(plan.pod.to_string()),
        uid: Some(plan.uid.to_string()),
        ..ObjectReference::default()
    };
    let vpa_ref = ObjectReference {
        api_version: Some("autoscaling.k8s.io/v1".into()),
        kind: Some("VerticalPodAutoscaler".into()),
        namespace: Some(plan.namespace.to_string()),
        name: Some(plan.vpa.to_string()),
        ..ObjectReference::default()
    };
    match plan.action {
        // Held back or nothing to do: this pass leaves the pod alone.
        Action::None | Action::Deferred => Outcome::Nothing,
        // An unboost whose resources are right already: the annotations only.
        Action::Resize if plan.ops.is_empty() => {
            remove_boost_annotations(client, plan, &key).await;
            Outcome::Nothing
        }
        Action::Resize => {
            let body = resize::resize_patch(&plan.ops, &plan.resource_version);
            match resize::resize(client, &plan.namespace, &plan.pod, &body).await {
                Ok(()) => {
                    remove_boost_annotations(client, plan, &key).await;
                    metrics.resized();
                    let at = Timestamp::now().as_second();
                    tracing::info!(pod = %key, reason = %plan.message, "resized in place");
                    emit(recorder, &pod_ref, "InPlaceResizedByVPA", "Pod was resized in place by nodescope's updater to its node's recommendation.", EventType::Normal).await;
                    emit(recorder, &vpa_ref, "InPlaceResizedPod", &format!("nodescope's updater resized Pod {} in place to its group's recommendation.", plan.pod), EventType::Normal).await;
                    Outcome::Resized { key, at }
                }
                Err(error) => {
                    let (reason, outcome) = match &error {
                        ResizeError::Infeasible { .. } => (
                            "Infeasible",
                            Outcome::Infeasible {
                                uid: plan.uid.to_string(),
                                asked: requested(plan),
                            },
                        ),
                        ResizeError::Stale { .. } => ("Stale", Outcome::Nothing),
                        ResizeError::Api { .. } => ("Error", Outcome::Nothing),
                    };
                    metrics.resize_failed(reason);
                    tracing::warn!(%error, "resize refused");
                    emit(
                        recorder,
                        &pod_ref,
                        "InPlaceResizeFailed",
                        &error.to_string(),
                        EventType::Warning,
                    )
                    .await;
                    outcome
                }
            }
        }
        Action::Evict => {
            let api: Api<Pod> = Api::namespaced(client.clone(), &plan.namespace);
            match api
                .evict(&plan.pod, &evict::params(&plan.uid, &plan.resource_version))
                .await
            {
                Ok(_) => {
                    metrics.evicted();
                    tracing::info!(pod = %key, reason = %plan.message, "evicted");
                    emit(recorder, &pod_ref, "EvictedByVPA", "Pod was evicted by nodescope's updater to apply its node's recommendation.", EventType::Normal).await;
                    emit(recorder, &vpa_ref, "EvictedPod", &format!("nodescope's updater evicted Pod {} to apply its group's recommendation.", plan.pod), EventType::Normal).await;
                }
                Err(kube::Error::Api(status)) if status.code == 429 => {
                    metrics.eviction_failed("DisruptionBudget");
                    tracing::warn!(pod = %key, message = %status.message, "eviction blocked by a PodDisruptionBudget");
                    let note = format!(
                        "nodescope's updater could not evict the pod: {}",
                        status.message
                    );
                    emit(
                        recorder,
                        &pod_ref,
                        "EvictionBlocked",
                        &note,
                        EventType::Warning,
                    )
                    .await;
                    emit(
                        recorder,
                        &vpa_ref,
                        "EvictionBlocked",
                        &format!("Pod {}: {note}", plan.pod),
                        EventType::Warning,
                    )
                    .await;
                }
                Err(kube::Error::Api(status)) if crate::stale::is_stale(&status) => {
                    metrics.eviction_failed("Stale");
                    tracing::info!(pod = %key, message = %status.message, "eviction not needed: the pod changed or is gone");
                }
                Err(error) => {
                    metrics.eviction_failed("Error");
                    tracing::warn!(pod = %key, %error, "eviction failed");
                }
            }
            Outcome::Nothing
        }
    }
}

/// Upstream's second patch of an unboost: the expired
/// `vpaCpuStartupBoost/<container>` annotations removed from the pod,
/// after the resize. A failure is logged and the next pass tries again
/// (the pod still carries them, so it is still an unboost).
async fn remove_boost_annotations(client: &Client, plan: &PodPlan, key: &str) {
    if plan.unboost.is_empty() {
        return;
    }
    let operations = plan
        .unboost
        .iter()
        .map(|annotation| {
            let mut path = json_patch::jsonptr::PointerBuf::new();
            for token in ["metadata", "annotations", annotation.as_str()] {
                path.push_back(json_patch::jsonptr::Token::new(token));
            }
            json_patch::PatchOperation::Remove(json_patch::RemoveOperation { path })
        })
        .collect();
    let api: Api<Pod> = Api::namespaced(client.clone(), &plan.namespace);
    let patch = kube::api::Patch::<()>::Json(json_patch::Patch(operations));
    match api
        .patch(&plan.pod, &kube::api::PatchParams::default(), &patch)
        .await
    {
        Ok(_) => {
            tracing::info!(pod = %key, annotations = ?plan.unboost, "startup boost annotations removed")
        }
        Err(error) => {
            tracing::warn!(pod = %key, %error, "startup boost annotations not removed; next pass")
        }
    }
}

async fn emit(
    recorder: &Recorder,
    reference: &ObjectReference,
    reason: &str,
    note: &str,
    type_: EventType,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note.chars().take(1000).collect()),
        action: "Update".to_owned(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, reference).await {
        tracing::warn!(%error, reason, "event not written");
    }
}

/// A token bucket for evictions: upstream's `--eviction-rate-limit` and
/// `--eviction-rate-burst` (a limit of 0 or less means none). Written here
/// because a pass takes at most one token per eviction and never waits: a
/// pod over the limit waits for the next pass, as it would under upstream's
/// limiter between passes.
struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new((rate, burst): (f64, u32)) -> Self {
        let burst = f64::from(burst.max(1));
        Bucket {
            rate,
            burst,
            tokens: burst,
            at: Instant::now(),
        }
    }

    fn take(&mut self) -> bool {
        if self.rate <= 0.0 {
            return true;
        }
        let now = Instant::now();
        self.tokens =
            (self.tokens + now.duration_since(self.at).as_secs_f64() * self.rate).min(self.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

async fn watch_pods(client: Client, workloads: Shared) {
    let api: Api<Pod> = Api::all(client);
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut fresh = Workloads::default();
    while let Some(event) = events.next().await {
        let read = |pod: &Pod| {
            serde_json::to_value(pod)
                .map_err(|e| e.to_string())
                .and_then(|mut v| {
                    v["apiVersion"] = "v1".into();
                    v["kind"] = "Pod".into();
                    RunningPod::from_value(&v).map_err(|e| e.to_string())
                })
        };
        match event {
            Ok(WatchEvent::Init) => fresh = Workloads::default(),
            Ok(WatchEvent::InitApply(pod)) => match read(&pod) {
                Ok(p) => fresh.put_pod(p),
                Err(error) => tracing::warn!(%error, "pod left out"),
            },
            Ok(WatchEvent::InitDone) => {
                let mut w = lock(&workloads);
                w.pods = std::mem::take(&mut fresh.pods);
            }
            Ok(WatchEvent::Apply(pod)) => match read(&pod) {
                Ok(p) => lock(&workloads).put_pod(p),
                Err(error) => tracing::warn!(%error, "pod left out"),
            },
            Ok(WatchEvent::Delete(pod)) => {
                let key = format!(
                    "{}/{}",
                    pod.metadata.namespace.unwrap_or_default(),
                    pod.metadata.name.unwrap_or_default()
                );
                lock(&workloads).pods.remove(&key);
            }
            Err(error) => tracing::warn!(%error, "pod watch failed; retrying"),
        }
    }
}

async fn watch_daemonsets(client: Client, workloads: Shared) {
    let api: Api<DaemonSet> = Api::all(client);
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut fresh = std::collections::HashMap::new();
    while let Some(event) = events.next().await {
        let read = |ds: &DaemonSet| {
            serde_json::to_value(ds)
                .map_err(|e| e.to_string())
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
                let key = (
                    ds.metadata.namespace.unwrap_or_default(),
                    ds.metadata.name.unwrap_or_default(),
                );
                lock(&workloads).daemonsets.remove(&key);
            }
            Err(error) => tracing::warn!(%error, "DaemonSet watch failed; retrying"),
        }
    }
}
