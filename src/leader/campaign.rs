//! The election task: drives the crate's manager, watches the Lease itself,
//! publishes whether this replica leads, and releases on request.

use super::view::{leads, Seen};
use super::{manager, LeaderError, LeaseConfig};
use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerError};
use serde_json::json;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

/// The crate's `changed()`, owned so that it survives the loop's other
/// wake-ups: cancelling it mid-renewal and calling it again would renew
/// again at once, on every watch event our own renewal causes.
type Changed = Pin<Box<dyn Future<Output = Result<bool, LeaseManagerError>> + Send>>;

/// Retries after an error: 1 s, doubling, at most 30 s (the crate's own
/// watcher backs off alike), from 1 s again after a quiet minute, so that
/// an old error never delays a later hand-over by the full 30 s.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MOST: Duration = Duration::from_secs(30);
const RETRY_QUIET: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Retry {
    next: Duration,
    last_error: Option<Instant>,
}

impl Retry {
    fn new() -> Self {
        Retry {
            next: RETRY_FIRST,
            last_error: None,
        }
    }

    /// How long to wait after an error at `now`.
    fn after_error(&mut self, now: Instant) -> Duration {
        if self
            .last_error
            .is_some_and(|last| now.saturating_duration_since(last) >= RETRY_QUIET)
        {
            self.next = RETRY_FIRST;
        }
        self.last_error = Some(now);
        let wait = self.next;
        self.next = (self.next * 2).min(RETRY_MOST);
        wait
    }
}

pub(super) struct Campaign {
    pub client: Client,
    pub config: LeaseConfig,
    pub identity: String,
    pub publish: watch::Sender<bool>,
}

enum Wake {
    Stop,
    Crate(Result<bool, LeaseManagerError>),
    Rebuild,
    /// A new version of the Lease; deleted is free (the crate creates it
    /// again).
    Version(Seen),
    WatchFailed(watcher::Error),
    WatchEnded,
    /// Nothing to act on: the start or end of a relist, or the deadline of
    /// the last renewal seen (the loop re-decides).
    Nothing,
}

impl Wake {
    fn of(event: Option<Result<Event<Lease>, watcher::Error>>) -> Self {
        match event {
            Some(Ok(Event::Apply(lease) | Event::InitApply(lease))) => {
                Wake::Version(Seen::of(&lease))
            }
            Some(Ok(Event::Delete(_))) => Wake::Version(Seen::default()),
            Some(Ok(Event::Init | Event::InitDone)) => Wake::Nothing,
            Some(Err(error)) => Wake::WatchFailed(error),
            None => Wake::WatchEnded,
        }
    }
}

impl Campaign {
    /// Runs until `stop`, then clears the Lease if this replica holds it.
    pub(super) async fn run(
        self,
        first: LeaseManager,
        mut stop: oneshot::Receiver<()>,
    ) -> Result<(), LeaderError> {
        let lease = self.config.lease();
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let mut events = lease_events(&api, &self.config.name);
        let mut manager = Some(Arc::new(first));
        let mut pending = manager.as_ref().map(changed);
        // The crate's view, the watch's view, and what was published.
        let mut holding = false;
        let mut seen: Option<Seen> = None;
        let mut leading = false;
        let mut rebuild_at: Option<Instant> = None;
        let mut retry = Retry::new();
        loop {
            let now = SystemTime::now();
            let lead = leads(holding, seen.as_ref(), &self.identity, now);
            if lead != leading {
                leading = lead;
                tracing::info!(%lease, identity = %self.identity, leading, "leadership changed");
                self.publish.send_replace(leading);
            }
            // A leader whose renewals stop showing up stops at the expiry
            // of the last one seen, before a follower can take over.
            let expiry = seen
                .as_ref()
                .and_then(|s| s.expiry)
                .filter(|_| leading)
                .map(|e| Instant::now() + e.duration_since(now).unwrap_or(Duration::ZERO));
            let wake = tokio::select! {
                biased;
                _ = &mut stop => Wake::Stop,
                result = poll(pending.as_mut()) => Wake::Crate(result),
                () = until(rebuild_at) => Wake::Rebuild,
                event = events.next() => Wake::of(event),
                () = until(expiry) => Wake::Nothing,
            };
            let new_version = matches!(wake, Wake::Version(_));
            match wake {
                Wake::Stop => break,
                Wake::Crate(Ok(holds)) => {
                    holding = holds;
                    pending = manager.as_ref().map(changed);
                }
                Wake::Crate(Err(error)) => {
                    // Whether the crate still holds the Lease is unknown:
                    // a fresh manager reads it again (and takes up a Lease
                    // still ours at once, the identity being the same).
                    let wait = retry.after_error(Instant::now());
                    tracing::warn!(%lease, %error, retry_in = ?wait, "leader election failed; retrying");
                    (holding, manager, pending) = (false, None, None);
                    rebuild_at = Some(Instant::now() + wait);
                }
                Wake::Rebuild => {
                    rebuild_at = None;
                    match manager_for(&self).await {
                        Ok(fresh) => {
                            let fresh = Arc::new(fresh);
                            pending = Some(changed(&fresh));
                            manager = Some(fresh);
                        }
                        Err(error) => {
                            let wait = retry.after_error(Instant::now());
                            tracing::warn!(%error, retry_in = ?wait, "leader election failed; retrying");
                            rebuild_at = Some(Instant::now() + wait);
                        }
                    }
                }
                Wake::Version(version) => seen = Some(version),
                Wake::WatchFailed(error) => {
                    tracing::warn!(%lease, %error, "watching the Lease failed; backing off");
                }
                Wake::WatchEnded => events = lease_events(&api, &self.config.name),
                Wake::Nothing => {}
            }
            // The crate's follower sleeps until the expiry it read, even
            // when the Lease has been released since: a fresh manager reads
            // it again and locks it now. Once per version seen free (each
            // is one release), and only if not rebuilding already. A crate
            // that believes it holds a Lease seen free has been cleared by
            // another replica: it starts over too.
            if new_version && manager.is_some() && seen.as_ref().is_some_and(Seen::is_free) {
                tracing::debug!(%lease, "the Lease is free; taking it");
                (holding, manager, pending) = (false, None, None);
                rebuild_at = Some(Instant::now());
            }
        }
        self.publish.send_replace(false);
        drop((pending, manager));
        let released = release(&api, &self.config.name, &self.identity)
            .await
            .map_err(|source| LeaderError::Release {
                lease: lease.clone(),
                source,
            })?;
        if released {
            tracing::info!(%lease, identity = %self.identity, "released the Lease");
        }
        Ok(())
    }
}

async fn manager_for(campaign: &Campaign) -> Result<LeaseManager, LeaderError> {
    manager(&campaign.client, &campaign.config, &campaign.identity).await
}

fn changed(manager: &Arc<LeaseManager>) -> Changed {
    let manager = Arc::clone(manager);
    Box::pin(async move { manager.changed().await })
}

/// The crate's pending change, or never.
async fn poll(pending: Option<&mut Changed>) -> Result<bool, LeaseManagerError> {
    match pending {
        Some(changed) => changed.await,
        None => std::future::pending().await,
    }
}

/// `at`, or never.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Every version of the one Lease; a failing watch backs off and resumes.
fn lease_events(
    api: &Api<Lease>,
    name: &str,
) -> BoxStream<'static, Result<Event<Lease>, watcher::Error>> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher(api.clone(), config).default_backoff().boxed()
}

/// Clears the Lease if `identity` holds it, with the resourceVersion read:
/// never another replica's lock. Whether it cleared.
async fn release(api: &Api<Lease>, name: &str, identity: &str) -> Result<bool, kube::Error> {
    let params = PatchParams {
        field_manager: Some(format!("nodescope-leader/{identity}")),
        ..PatchParams::default()
    };
    // A conflict is a renewal or a take-over in between: read again.
    for _ in 0..3 {
        let current = api.get(name).await?;
        if Seen::of(&current).holder.as_deref() != Some(identity) {
            return Ok(false);
        }
        let patch = release_patch(current.metadata.resource_version.as_deref().unwrap_or(""));
        match api.patch(name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error),
        }
    }
    Ok(false)
}

/// The merge patch that frees the Lease as the crate's own release does
/// (leaving `leaseTransitions`), failing unless the Lease is still at
/// `resource_version`.
fn release_patch(resource_version: &str) -> serde_json::Value {
    json!({
        "metadata": {"resourceVersion": resource_version},
        "spec": {"holderIdentity": null, "acquireTime": null, "renewTime": null, "leaseDurationSeconds": null},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_back_off_from_one_second_to_thirty_and_start_over_after_a_quiet_minute() {
        let start = Instant::now();
        let mut retry = Retry::new();
        let waits: Vec<u64> = (0..7)
            .map(|i| retry.after_error(start + Duration::from_secs(i)).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        // 59 s after the last error the backoff still holds; 60 s, it is over.
        let last = start + Duration::from_secs(6);
        assert_eq!(
            retry.after_error(last + Duration::from_secs(59)).as_secs(),
            30
        );
        let quiet = last + Duration::from_secs(59) + RETRY_QUIET;
        assert_eq!(retry.after_error(quiet).as_secs(), 1);
        assert_eq!(retry.after_error(quiet).as_secs(), 2);
    }

    #[test]
    fn the_release_clears_the_holder_only_at_the_version_read() {
        assert_eq!(
            release_patch("812"),
            json!({"metadata": {"resourceVersion": "812"},
                   "spec": {"holderIdentity": null, "acquireTime": null, "renewTime": null, "leaseDurationSeconds": null}})
        );
    }
}
