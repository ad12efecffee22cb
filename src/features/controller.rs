//! The feature lifecycle controller: the thin edge around
//! [`super::lifecycle::next_status`] and [`super::find_uses`]. Each pass
//! reads the gating policies, the Features and, in pages evaluated one at
//! a time ([`super::period`]), the objects the policies match (through
//! discovery: no kind is known here) from the apiserver, decides, and writes each changed status through the status subresource
//! by server-side apply of its own fields (see [`write`]: no reporter's
//! write can make it fail, and a spec changed meanwhile stops it), with an
//! Event saying why.

use super::cleanup::{self, CleanupRule};
use super::cluster::{feature_resource, read_features, ClusterError};
use super::lifecycle::{next_status_reported, Desired, State, Step};
use super::metrics::{FeatureFamilies, FeatureSample, FeaturesMetrics};
use super::period::{self, Job, Period};
use super::report;
use super::status::{desired, generation, recorded, status_apply};
use super::wake::Wakers;
use crate::json::str_at;
use crate::leader::{self, LeaseConfig};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde_json::Value;
use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// How long `TurningOff` lasts at least before `Off`.
    pub settle: Duration,
    /// How often every Feature is re-evaluated.
    pub period: Duration,
    /// The least time between two passes that a watch event starts: each
    /// pass lists every matched object again, so on a busy cluster (pods
    /// come and go all the time) events must not turn into a list storm.
    pub min_interval: Duration,
    /// Who writes, in Events (`reportingInstance`), and who holds the Lease.
    pub instance: String,
    /// The Lease only whose leader writes.
    pub lease: LeaseConfig,
    /// Create the Features nodescope owns ([`super::owned`]) when absent,
    /// on becoming leader.
    pub announce: bool,
}

/// Elects, then runs passes while this replica leads ([`lead`]) until
/// `shutdown` resolves (SIGTERM or Ctrl-C in the binary); then releases the
/// Lease, once no pass is running any more, so that another replica takes
/// over within [`LeaseConfig::released_handover`] rather than at expiry.
///
/// # Errors
/// When the Lease cannot be created or read at start, or the duration is
/// not whole seconds of at least 2, or the election task failed. A release
/// that fails on shutdown is only logged: the Lease expires on its own.
pub async fn run(
    client: Client,
    config: ControllerConfig,
    metrics: &FeaturesMetrics,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ClusterError> {
    let leadership = leader::elect(client.clone(), &config.lease, &config.instance).await?;
    let _export = leadership.export(&metrics.leader);
    let asked = tokio::select! {
        () = lead(&client, &config, &metrics.features, leadership.leading()) => false,
        () = shutdown => true,
    };
    match leadership.release().await {
        Err(error) if asked => {
            tracing::warn!(%error, "the Lease was not released; it expires on its own");
            Ok(())
        }
        result => Ok(result?),
    }
}

/// Runs passes forever while `leading` says so: after each, sleeps for the
/// period, or less when a Feature's settle time ends sooner or a watched
/// object changes ([`Wakers`]). A replica that does not lead only waits,
/// so with two replicas only the leader writes. Returns when the election
/// has ended.
async fn lead(
    client: &Client,
    config: &ControllerConfig,
    metrics: &FeatureFamilies,
    mut leading: watch::Receiver<bool>,
) {
    let lease_name = config.lease.lease();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "nodescope-features".to_owned(),
            instance: Some(config.instance.clone()),
        },
    );
    let mut wakers = Wakers::new(client);
    let mut was_leading = false;
    // Whether the Features nodescope owns are in place: retried each pass
    // until they are (the Feature CRD may be installed after the controller).
    let mut announced = !config.announce;
    loop {
        if !*leading.borrow_and_update() {
            if was_leading {
                tracing::info!(lease = %lease_name, instance = %config.instance, "lost the Lease");
                // The new leader's series are the ones to read.
                metrics.observe(&[]);
            }
            was_leading = false;
            tracing::info!(lease = %lease_name, instance = %config.instance, "waiting for the Lease");
            if leading.changed().await.is_err() {
                return;
            }
            continue;
        }
        if !was_leading {
            tracing::info!(lease = %lease_name, instance = %config.instance, "leading");
            was_leading = true;
            announced = !config.announce;
        }
        if !announced {
            match super::owned::announce(client, &manager(&config.instance)).await {
                Ok(created) => {
                    announced = true;
                    if !created.is_empty() {
                        tracing::info!(?created, "created the Features nodescope owns");
                    }
                }
                // No Feature CRD yet: said once by the pass's own read.
                Err(error) if crate::store::presence::is_not_served(&error) => {}
                Err(error) => {
                    tracing::warn!(%error, "the Features nodescope owns were not created; retried next pass")
                }
            }
        }
        let started = tokio::time::Instant::now();
        let wait = match pass(client, &recorder, config, metrics, &|| *leading.borrow()).await {
            Ok((wait, resources)) => {
                wakers.watch(&resources);
                wait
            }
            Err(error) => {
                tracing::warn!(%error, "feature pass failed; retrying next period");
                config.period
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait.max(Duration::from_millis(200))) => {}
            () = wakers.changed() => {
                // Let a burst of changes (a rollout, our own status write)
                // land before the pass that reads them, and keep passes
                // min_interval apart.
                let next = started + config.min_interval;
                tokio::time::sleep_until(next.max(tokio::time::Instant::now() + Duration::from_millis(200))).await;
            }
            changed = leading.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// One pass over every Feature with `spec.desired`; how long until the
/// next one.
///
/// # Errors
/// When the policies, the Features or the matched objects cannot be read.
pub async fn pass(
    client: &Client,
    recorder: &Recorder,
    config: &ControllerConfig,
    metrics: &FeatureFamilies,
    leading: &dyn Fn() -> bool,
) -> Result<(Duration, Vec<kube::discovery::ApiResource>), ClusterError> {
    let features: Vec<Value> = read_features(client)
        .await?
        .into_iter()
        .filter(|f| desired(f).is_some())
        .collect();
    if features.is_empty() {
        metrics.observe(&[]);
        return Ok((config.period, Vec::new()));
    }
    let jobs: Vec<Job<'_>> = features
        .iter()
        .map(|feature| Job {
            feature,
            cleanup: cleanup_rules(feature),
        })
        .collect();
    let Period { found, resources } = period::read(client, &jobs).await?;
    drop(jobs);
    let mut wait = config.period;
    let mut samples = Vec::new();
    // A Feature whose uses could not all be read keeps its state and its
    // gauges: the other Features' series are left as they were too.
    let mut failed = false;
    // Whole seconds, as metav1.Time stores them.
    let now =
        Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now());
    for (feature, found) in features.iter().zip(found) {
        let label = format!(
            "{}/{}",
            str_at(feature, "/metadata/namespace"),
            str_at(feature, "/metadata/name")
        );
        let found = match found {
            Ok(found) => found,
            Err(reason) => {
                tracing::warn!(feature = %label, %reason, "uses not read; the Feature's state is left as it was until a pass reads them all");
                failed = true;
                continue;
            }
        };
        let tasks = found.uses.tasks();
        let reports = report::reports(feature);
        let was = recorded(feature);
        let step = next_status_reported(
            desired(feature),
            &was,
            &tasks,
            &reports,
            generation(feature),
            now,
            config.settle,
        );
        samples.push(FeatureSample {
            namespace: str_at(feature, "/metadata/namespace").to_owned(),
            name: str_at(feature, "/metadata/name").to_owned(),
            state: was.state,
            uses: found.uses.total(),
            reports_missing: if desired(feature) == Some(Desired::Disabled) {
                report::unconfirmed(&reports, generation(feature), now).len()
            } else {
                0
            },
        });
        if let Some(after) = step.recheck_after {
            wait = wait.min(after);
        }
        if !leading() {
            // Lost the Lease during the pass: the new leader decides.
            return Ok((config.period, resources));
        }
        let resource_version = match write(client, recorder, feature, &step, &config.instance).await
        {
            Ok(Written::At(version)) => version,
            Ok(Written::SpecChanged) => {
                tracing::info!(feature = %label, "spec changed during the pass; the next pass decides");
                wait = wait.min(Duration::from_secs(1));
                continue;
            }
            Err(error) => {
                tracing::warn!(feature = %label, %error, "status not written; the next pass re-reads the Feature");
                wait = wait.min(Duration::from_secs(1));
                continue;
            }
        };
        if let Some(state) = step.write.as_ref().and_then(|w| w.state) {
            if Some(state) != was.state {
                metrics.transition(was.state, state);
                if let Some(sample) = samples.last_mut() {
                    sample.state = Some(state);
                }
            }
        }
        let gone = report::expired(&reports, now);
        if !gone.is_empty() {
            // Guarded by the version this pass read or wrote: an entry
            // applied since moves the indices, and the patch fails.
            let patch = report::expiry_patch(&resource_version, &gone);
            let names: Vec<String> = gone.iter().map(|&i| reports[i].label()).collect();
            match remove_expired(client, feature, &patch, &config.instance).await {
                Ok(()) => {
                    tracing::info!(feature = %label, removed = ?names, "expired reports removed")
                }
                Err(error) => {
                    tracing::info!(feature = %label, %error, "expired reports not removed; the next pass retries");
                    wait = wait.min(Duration::from_secs(1));
                }
            }
        }
        // Only while TurningOff, and only what the Feature declares
        // (planned while the pages were read: [`cleanup_rules`]); the
        // removals wake the next pass through the watches of the listed
        // kinds, which finds the uses gone.
        let turning_off = step.write.as_ref().and_then(|w| w.state) != Some(State::Off);
        if turning_off && !found.patches.is_empty() {
            super::cleaner::apply(
                client,
                recorder,
                &resources,
                &found.patches,
                &label,
                &manager(&config.instance),
                metrics,
            )
            .await;
        }
    }
    if failed {
        return Ok((config.period, resources));
    }
    metrics.observe(&samples);
    Ok((wait, resources))
}

/// What to clear from `feature`'s uses this period: its `spec.cleanup`
/// while it is `TurningOff` towards `Disabled`, else nothing.
fn cleanup_rules(feature: &Value) -> Vec<CleanupRule> {
    if desired(feature) != Some(Desired::Disabled)
        || recorded(feature).state != Some(State::TurningOff)
    {
        return Vec::new();
    }
    cleanup::rules(feature).unwrap_or_else(|error| {
        tracing::warn!(%error, "cleanup not done");
        Vec::new()
    })
}

/// The field manager of the replica: managedFields say who wrote.
fn manager(instance: &str) -> String {
    format!("nodescope-features/{instance}")
}

/// Removes expired `status.uses` entries with `patch`
/// ([`report::expiry_patch`]).
async fn remove_expired(
    client: &Client,
    feature: &Value,
    patch: &Value,
    instance: &str,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        str_at(feature, "/metadata/namespace"),
        &feature_resource(),
    );
    let patch: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(kube::Error::SerdeError)?;
    api.patch_status(
        str_at(feature, "/metadata/name"),
        &PatchParams {
            field_manager: Some(manager(instance)),
            ..PatchParams::default()
        },
        &Patch::<()>::Json(patch),
    )
    .await
    .map(drop)
}

/// What [`write`] did.
enum Written {
    /// The status was applied (or there was nothing to write); the
    /// Feature's resourceVersion after it.
    At(String),
    /// The spec changed since the pass read it: nothing written, the next
    /// pass decides on the new spec.
    SpecChanged,
}

/// Applies `step`'s status and records its Event.
///
/// The controller's three fields (`state`, `lastTransitionTime`,
/// `transitionTasks`) are written by server-side apply under one field
/// manager, the replica's own ([`manager`]), as each reporter applies its own
/// `status.uses` entry: no write of a reporter can make this one fail, so
/// replicas that report every few hundred milliseconds no longer starve it
/// (an update conditioned on the resourceVersion read at the start of a
/// pass lost to them every time). What the decision rests on is checked
/// just before: the Feature is read again, and when its generation moved
/// (someone changed `spec.desired`) nothing is written. The reports it read
/// can only have gained confirmations since, and new uses are denied while
/// a Feature turns off, so neither can make the decision wrong.
async fn write(
    client: &Client,
    recorder: &Recorder,
    feature: &Value,
    step: &Step,
    instance: &str,
) -> Result<Written, kube::Error> {
    let Some(status) = &step.write else {
        return Ok(Written::At(
            str_at(feature, "/metadata/resourceVersion").to_owned(),
        ));
    };
    let namespace = str_at(feature, "/metadata/namespace");
    let name = str_at(feature, "/metadata/name");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &feature_resource());
    let now = api.get(name).await?;
    if now.metadata.generation.unwrap_or(0) != generation(feature) {
        return Ok(Written::SpecChanged);
    }
    let body = status_apply(namespace, name, status);
    let written = api
        .patch_status(
            name,
            // Forced: a replica that leads after another takes over the
            // same fields (the other then drops out of managedFields), and
            // so do the fields an older version wrote by merge patch.
            &PatchParams::apply(&manager(instance)).force(),
            &Patch::Apply(&body),
        )
        .await?;
    tracing::info!(feature = %format!("{namespace}/{name}"), state = status.state.map(State::as_str), tasks = status.transition_tasks.len(), "status written");
    if let Some((reason, note)) = &step.event {
        let reference = written.object_ref(&feature_resource());
        let event = Event {
            type_: EventType::Normal,
            reason: (*reason).to_owned(),
            note: Some(note.chars().take(1000).collect()),
            action: "Transition".to_owned(),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, &reference).await {
            tracing::warn!(%error, "event not recorded");
        }
    }
    Ok(Written::At(
        written.metadata.resource_version.unwrap_or_default(),
    ))
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
