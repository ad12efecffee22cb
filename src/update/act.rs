//! The updater's writes, the thin edge of a pass (as upstream's
//! `updater/inplace` and eviction code): one pod's `pods/resize` (guarded
//! by its resourceVersion) or `pods/eviction` (preconditioned on its UID
//! and resourceVersion, honouring PodDisruptionBudgets), its Events, and
//! what the next passes must remember of it. Decides nothing: the pass did.

use super::events::Events;
use super::metrics::UpdaterMetrics;
use super::plan::{requested, Memory};
use super::{Action, PodPlan};
use crate::pods::{evict, resize, ResizeError};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::Client;
use std::time::Instant;

/// What a write leaves for the next passes to remember.
pub(super) enum Outcome {
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
    pub(super) fn remember(self, memory: &mut Memory) {
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

pub(super) async fn act(
    client: &Client,
    events: &Events,
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
                    events.emit(&pod_ref, "InPlaceResizedByVPA", "Pod was resized in place by nodescope's updater to its node's recommendation.", EventType::Normal);
                    events.emit(&vpa_ref, "InPlaceResizedPod", &format!("nodescope's updater resized Pod {} in place to its group's recommendation.", plan.pod), EventType::Normal);
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
                    events.emit(
                        &pod_ref,
                        "InPlaceResizeFailed",
                        &error.to_string(),
                        EventType::Warning,
                    );
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
                    events.emit(&pod_ref, "EvictedByVPA", "Pod was evicted by nodescope's updater to apply its node's recommendation.", EventType::Normal);
                    events.emit(&vpa_ref, "EvictedPod", &format!("nodescope's updater evicted Pod {} to apply its group's recommendation.", plan.pod), EventType::Normal);
                }
                Err(kube::Error::Api(status)) if status.code == 429 => {
                    metrics.eviction_failed("DisruptionBudget");
                    tracing::warn!(pod = %key, message = %status.message, "eviction blocked by a PodDisruptionBudget");
                    let note = format!(
                        "nodescope's updater could not evict the pod: {}",
                        status.message
                    );
                    events.emit(&pod_ref, "EvictionBlocked", &note, EventType::Warning);
                    events.emit(
                        &vpa_ref,
                        "EvictionBlocked",
                        &format!("Pod {}: {note}", plan.pod),
                        EventType::Warning,
                    );
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

/// A token bucket for evictions: upstream's `--eviction-rate-limit` and
/// `--eviction-rate-burst` (a limit of 0 or less means none). Written here
/// because a pass takes at most one token per eviction and never waits: a
/// pod over the limit waits for the next pass, as it would under upstream's
/// limiter between passes.
pub(super) struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    pub(super) fn new((rate, burst): (f64, u32)) -> Self {
        let burst = f64::from(burst.max(1));
        Bucket {
            rate,
            burst,
            tokens: burst,
            at: Instant::now(),
        }
    }

    pub(super) fn take(&mut self) -> bool {
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
