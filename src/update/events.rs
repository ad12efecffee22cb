//! The updater's Events, sent beside its writes and never in their way, as
//! client-go's event broadcaster sends upstream's: a pass queues them and
//! goes on; one task writes them through a client paced by a bucket of its
//! own, so 2,000 resizes with two Events each wait for the resizes only.
//!
//! client-go's limits, kept: at most 1,000 Events queued (one more is
//! dropped, `maxQueuedEvents`), and at most 25 Events on one object, then
//! one every five minutes (`EventSourceObjectSpamFilter`), which keeps a
//! VPA whose 1,000 pods are resized from getting 1,000 Events. Every drop
//! is counted (`nodescope_updater_events_total{result}`).

use super::metrics::UpdaterMetrics;
use governor::{Quota, RateLimiter};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};
use std::num::NonZeroU32;
use std::time::Duration;
use tokio::sync::mpsc;

/// client-go's `maxQueuedEvents`.
pub const QUEUED: usize = 1000;
/// client-go's spam filter: a burst of 25 Events per object...
const SPAM_BURST: u32 = 25;
/// ...then one every five minutes.
const SPAM_PERIOD: Duration = Duration::from_secs(300);
/// How many Events between two prunings of the spam filter's objects.
const PRUNE_EVERY: u32 = 4096;

struct Queued {
    reference: ObjectReference,
    event: Event,
}

/// Where a pass puts its Events; cheap to clone.
#[derive(Clone)]
pub struct Events {
    queue: mpsc::Sender<Queued>,
    metrics: UpdaterMetrics,
    dropped: std::sync::Arc<crate::throttle::Throttle>,
}

impl Events {
    /// Starts the task that writes through `recorder` (whose client is
    /// paced apart from the writes').
    #[must_use]
    pub fn start(recorder: Recorder, metrics: UpdaterMetrics) -> Self {
        let (queue, receiver) = mpsc::channel(QUEUED);
        tokio::spawn(send(recorder, receiver, metrics.clone()));
        Events {
            queue,
            metrics,
            dropped: std::sync::Arc::default(),
        }
    }

    /// Queues one Event; drops it (counted) when [`QUEUED`] are waiting.
    pub fn emit(&self, reference: &ObjectReference, reason: &str, note: &str, type_: EventType) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note.chars().take(1000).collect()),
            action: "Update".to_owned(),
            secondary: None,
        };
        let queued = Queued {
            reference: reference.clone(),
            event,
        };
        if self.queue.try_send(queued).is_err() {
            self.metrics.event("dropped_queue_full");
            if let Some(held_back) = self.dropped.admit() {
                tracing::warn!(
                    reason,
                    held_back,
                    "event dropped: {QUEUED} are waiting to be written"
                );
            }
        }
    }
}

fn object_key(reference: &ObjectReference) -> String {
    format!(
        "{}/{}/{}/{}",
        reference.kind.as_deref().unwrap_or_default(),
        reference.namespace.as_deref().unwrap_or_default(),
        reference.name.as_deref().unwrap_or_default(),
        reference.uid.as_deref().unwrap_or_default()
    )
}

async fn send(recorder: Recorder, mut receiver: mpsc::Receiver<Queued>, metrics: UpdaterMetrics) {
    let quota = Quota::with_period(SPAM_PERIOD)
        .map(|q| q.allow_burst(NonZeroU32::MIN.saturating_add(SPAM_BURST - 1)));
    let Some(quota) = quota else {
        // A constant nonzero period; kept as a branch rather than unwrap.
        return;
    };
    let spam = RateLimiter::hashmap(quota);
    let mut since_prune = 0u32;
    let failures = crate::throttle::Throttle::new();
    while let Some(Queued { reference, event }) = receiver.recv().await {
        since_prune += 1;
        if since_prune >= PRUNE_EVERY {
            spam.retain_recent();
            spam.shrink_to_fit();
            since_prune = 0;
        }
        if spam.check_key(&object_key(&reference)).is_err() {
            metrics.event("dropped_spam");
            continue;
        }
        match recorder.publish(&event, &reference).await {
            Ok(()) => metrics.event("sent"),
            Err(error) => {
                metrics.event("failed");
                // An apiserver away fails every queued Event: a few lines,
                // then one a second saying how many were held back.
                if let Some(held_back) = failures.admit() {
                    tracing::warn!(%error, reason = %event.reason, held_back, "event not written");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spam_filter_allows_25_events_per_object_then_none_for_a_while() {
        let quota = Quota::with_period(SPAM_PERIOD)
            .map(|q| q.allow_burst(NonZeroU32::MIN.saturating_add(SPAM_BURST - 1)))
            .unwrap_or_else(|| panic!("a quota"));
        let spam = RateLimiter::hashmap(quota);
        let allowed = (0..40).filter(|_| spam.check_key(&"vpa").is_ok()).count();
        assert_eq!(allowed, 25);
        assert!(spam.check_key(&"another").is_ok(), "each object its own");
    }
}
