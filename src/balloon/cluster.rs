//! The balloon controller against a cluster: watches of Nodes and Pods
//! (each event read down to what a pass decides with, [`super::watched`]),
//! one pass every `--interval` while this replica holds the Lease, and the
//! writes the pass decided: `pods/resize` of the balloon (guarded by its
//! resourceVersion, through [`crate::pods::resize`]), the Node's state
//! annotations, and an Event on the Node when a resize is refused,
//! infeasible or deferred. It never evicts or preempts.

use super::metrics::BalloonMetrics;
use super::watched::{lock, NodeWatch, PodWatch, Watched, Written};
use super::{plan, BalloonConfig, NodePlan, State, REASON_ANNOTATION, STATE_ANNOTATION};
use crate::json::text::ObjectText;
use crate::leader::{self, LeaseConfig};
use crate::pods::{resize, ResizeError};
use crate::throttle::Throttle;
use futures::StreamExt;
use governor::Quota;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use kube::api::{Api, ApiResource, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the controller runs against a cluster.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    /// What a pass decides with.
    pub balloon: BalloonConfig,
    /// How often a pass runs.
    pub interval: Duration,
    /// The controller's Lease.
    pub lease: LeaseConfig,
    /// This replica's identity (its pod name).
    pub instance: String,
    /// How many nodes' resizes are in flight at once (`--kube-api-burst`;
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

/// Runs one watch of `api` into `state` through `on`, until the process
/// ends.
fn watch<K, W>(api: Api<K>, state: &Arc<Mutex<Watched>>, mut handler: W)
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    W: FnMut(watcher::Event<K>, &Mutex<Watched>, &Throttle) + Send + 'static,
{
    let state = Arc::clone(state);
    let events = watcher(api, watcher::Config::default()).default_backoff();
    let throttle = Throttle::new();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => handler(event, &state, &throttle),
                Err(error) => tracing::warn!(%error, "watch failed; retrying"),
            }
        }
    });
}

/// Runs until `shutdown`, then releases the Lease.
///
/// # Errors
/// When the election cannot start.
pub async fn run(
    client: Client,
    config: LoopConfig,
    metrics: BalloonMetrics,
    ready: Arc<AtomicBool>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), ClusterError> {
    let state: Arc<Mutex<Watched>> = Arc::default();
    let mut node_watch = NodeWatch::default();
    let nodes: Api<Node> = Api::all(client.clone());
    watch(nodes, &state, move |e, s, t| node_watch.on(e, s, t));
    let mut pod_watch = PodWatch::default();
    // Pods as their text (`ObjectText`): no whole Pod is built.
    let pods: Api<ObjectText> = Api::all_with(client.clone(), &ApiResource::erase::<Pod>(&()));
    watch(pods, &state, move |e, s, t| pod_watch.on(e, s, t));
    let leadership = leader::elect(client.clone(), &config.lease, &config.instance).await?;
    let mut leading = leadership.leading();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "nodescope-balloon".to_owned(),
            instance: Some(config.instance.clone()),
        },
    );
    let mut ticker = tokio::time::interval(config.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let failures = failure_log();
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
        // The plans and what the writes read, under the lock; the writes
        // after it, so that the watches go on while they are in flight.
        let (is_synced, plans, written) = {
            let s = lock(&state);
            if s.synced() {
                let plans = plan(s.decidable(), &s.pods, &config.balloon);
                let written: HashMap<String, Written> = plans
                    .iter()
                    .filter_map(|p| s.nodes.get(&p.node))
                    .map(|n| (n.node.name.clone(), n.written.clone()))
                    .collect();
                (true, plans, written)
            } else {
                (false, Vec::new(), HashMap::new())
            }
        };
        ready.store(is_synced, Ordering::SeqCst);
        if !is_synced {
            continue;
        }
        metrics.observe(&plans);
        if !is_leader {
            continue;
        }
        // Each node's plan is its own (one balloon, one Node): they go
        // concurrently, at the client's pace.
        let leading_now = || *leading.borrow();
        futures::stream::iter(&plans)
            .for_each_concurrent(config.in_flight.max(1), |plan| {
                let written = written.get(&plan.node).cloned().unwrap_or_default();
                let (client, recorder, metrics, failures) =
                    (&client, &recorder, &metrics, &failures);
                async move {
                    // Lost the Lease during the pass: the new leader decides.
                    if leading_now() {
                        act(client, recorder, metrics, failures, plan, written).await;
                    }
                }
            })
            .await;
    }
    if let Err(error) = leadership.release().await {
        tracing::warn!(%error, "Lease not released; it expires on its own");
    }
    Ok(())
}

/// The throttle of the lines that say a write failed: a failure that
/// lasts is met again every pass, and would otherwise be logged every
/// `--interval` for as long. Ten at once, then one a minute; a line let
/// through counts those held back.
fn failure_log() -> Throttle {
    Throttle::with_quota(
        Quota::per_minute(NonZeroU32::MIN)
            .allow_burst(NonZeroU32::new(10).unwrap_or(NonZeroU32::MIN)),
    )
}

/// Logs a failed write to the apiserver once, as fields: the node, what
/// was written, the API's `reason` and its message as `detail` (tracing
/// keeps `message` for the line's own words); not kube's error text, which
/// repeats the message inside a debug dump of the Status.
fn log_failure(throttle: &Throttle, node: &str, what: &str, error: &kube::Error) {
    let Some(suppressed) = throttle.admit() else {
        return;
    };
    let (reason, message) = resize::api_reason(error);
    tracing::warn!(
        node,
        write = what,
        reason = reason.as_str(),
        detail = message.as_str(),
        suppressed,
        "balloon write failed"
    );
}

/// Carries one node's plan out: the resize, then the state annotations and
/// an Event when they change.
async fn act(
    client: &Client,
    recorder: &Recorder,
    metrics: &BalloonMetrics,
    failures: &Throttle,
    plan: &NodePlan,
    written: Written,
) {
    let mut state = plan.state;
    let mut reason = plan.reason.clone();
    if let Some(r) = &plan.resize {
        let ops = r
            .containers
            .iter()
            .flat_map(|c| resize::container_resources_ops(c.index, &c.requests, &c.limits))
            .collect();
        let body = resize::resize_body(ops, &r.resource_version);
        match resize::resize(client, &r.namespace, &r.name, &body).await {
            Ok(()) => {
                metrics.result("Resized");
                tracing::info!(node = %plan.node, reason = %plan.reason, "balloon resized");
                state = State::Resizing;
            }
            Err(error) => {
                let outcome = match &error {
                    ResizeError::Infeasible { .. } => "Infeasible",
                    ResizeError::Stale { .. } => "Stale",
                    ResizeError::Api { .. } => "Error",
                };
                metrics.result(outcome);
                if let Some(suppressed) = failures.admit() {
                    let (reason, message) = error.reason();
                    tracing::warn!(
                        node = %plan.node,
                        pod = error.pod(),
                        reason = reason.as_str(),
                        detail = message.as_str(),
                        suppressed,
                        "balloon resize failed"
                    );
                }
                if outcome != "Infeasible" {
                    return;
                }
                state = State::Infeasible;
                reason = error.to_string();
            }
        }
    }
    if state == State::Unmanaged
        || (written.state.as_deref() == Some(state.as_str())
            && written.reason.as_deref() == Some(&reason))
    {
        return;
    }
    if state == State::Refused {
        metrics.result("Refused");
    }
    let patch = serde_json::json!({"metadata": {"annotations": {
        STATE_ANNOTATION: state.as_str(),
        REASON_ANNOTATION: reason,
    }}});
    let api: Api<Node> = Api::all(client.clone());
    if let Err(error) = api
        .patch(&plan.node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        log_failure(failures, &plan.node, "state annotations", &error);
    }
    let (event, type_) = match state {
        State::Refused => ("BalloonUpsizeRefused", EventType::Warning),
        State::Infeasible => ("BalloonResizeInfeasible", EventType::Warning),
        State::Deferred => ("BalloonResizeDeferred", EventType::Normal),
        State::Invalid => ("BalloonInvalid", EventType::Warning),
        State::Resizing if plan.resize.is_some() => ("BalloonResized", EventType::Normal),
        _ => return,
    };
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(plan.node.clone()),
        uid: written.uid,
        ..ObjectReference::default()
    };
    let event = Event {
        type_,
        reason: event.to_owned(),
        note: Some(reason.chars().take(1000).collect()),
        action: "Resize".to_owned(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &reference).await {
        log_failure(failures, &plan.node, "event", &error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::balloon::watched_tests::logged;

    #[test]
    fn an_api_failure_is_logged_once_as_its_reason_and_message_and_then_held_back() {
        let status = kube::core::Status {
            code: 404,
            reason: "NotFound".to_owned(),
            message: "nodes \"node-a\" not found".to_owned(),
            ..kube::core::Status::default()
        };
        let error = kube::Error::Api(Box::new(status));
        let throttle = failure_log();
        let text = logged(|| {
            for _ in 0..12 {
                log_failure(&throttle, "node-a", "state annotations", &error);
            }
        });
        let line = r#" WARN nodescope::balloon::cluster: balloon write failed node="node-a" write="state annotations" reason="NotFound" detail="nodes \"node-a\" not found" suppressed=0"#;
        let expected = format!("{line}\n").repeat(10);
        assert_eq!(text, expected);
    }
}
