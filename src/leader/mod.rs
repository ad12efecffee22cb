//! Leader election on a coordination.k8s.io Lease, for every nodescope
//! controller that runs as several replicas of which only one may write.
//!
//! Owns: when this replica may act as the leader, and handing the Lease
//! over. Must not: know what the controller does.
//!
//! Locking and renewing are `kube-lease-manager`'s ([`LeaseManager`]); this
//! module adds what a controller needs and the crate (0.13) does not give:
//!
//! - **A prompt hand-over on shutdown.** [`Leadership::release`] clears the
//!   Lease, and the followers see it through their own watch of the Lease:
//!   the crate's follower only sleeps until the expiry it last read, so on
//!   its own it would take the released Lease no sooner than a dead
//!   leader's. A follower that sees the Lease free starts a fresh manager,
//!   which reads the Lease again and locks it at once.
//! - **Leading only while the apiserver says so.** The published state is
//!   true only while the crate holds the Lease *and* the newest version of
//!   the Lease seen says this replica holds it, unexpired. The crate keeps
//!   believing it leads while a renewal hangs or after another replica
//!   cleared its lock (its force release of an expired Lease carries no
//!   precondition); the watch ends that belief at the Lease's expiry at the
//!   latest, before any follower may take over.
//! - **A release that cannot clear another's lock.** The crate's `release`
//!   trusts its cached state and writes without a precondition (and panics
//!   on a conflict); ours re-reads the Lease and patches with its
//!   resourceVersion.
//!
//! How long a hand-over takes, and why those numbers, is
//! [`LeaseConfig::released_handover`] and [`LeaseConfig::crashed_handover`].
//!
//! [`status`] is the other use of a Lease here: not an election, but the
//! webhook replicas saying they serve, which the updater reads before it
//! evicts.

mod campaign;
pub mod status;
mod view;

use crate::metrics::LeaderMetrics;
use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use std::ops::RangeInclusive;
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

pub use view::{leads, Seen};

/// The longest random pause of the crate's follower between clearing an
/// expired Lease and locking it (`MAX_RELEASE_WAITING_MILLIS` in
/// kube-lease-manager 0.13), meant to keep followers from colliding.
pub const TAKEOVER_JITTER: Duration = Duration::from_secs(1);

/// What the bounds allow for the apiserver requests of one hand-over: about
/// ten on the crash path (reads, the clearing patch, the locking patches)
/// and as many on the graceful one, each a few milliseconds on a healthy
/// apiserver. Not a guarantee of the apiserver; the part of the bounds that
/// nodescope controls has no sleep in it beyond [`TAKEOVER_JITTER`].
pub const REQUEST_ALLOWANCE: Duration = Duration::from_secs(1);

/// Where the replicas elect their leader.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// How long a leader's Lease lasts after its last renewal: after a
    /// crash, no follower takes it sooner. Whole seconds, at least 2 s
    /// (`leaseDurationSeconds` is an integer, and the leader renews a third
    /// of it, at least a second, before expiry).
    pub duration: Duration,
}

impl LeaseConfig {
    /// `namespace/name`, as errors, logs and the gauge name it.
    #[must_use]
    pub fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// `leaseDurationSeconds`.
    ///
    /// # Errors
    /// Below 2 s or not whole seconds: the bounds would not be the ones
    /// documented.
    pub fn duration_seconds(&self) -> Result<u64, LeaderError> {
        let seconds = self.duration.as_secs();
        if seconds < 2 || self.duration.subsec_nanos() != 0 {
            return Err(LeaderError::Duration {
                lease: self.lease(),
                duration: self.duration,
            });
        }
        Ok(seconds)
    }

    /// How long before expiry the leader renews: a third of the duration
    /// (at least 1 s, and the crate panics unless it is below the
    /// duration), so one failed renewal still leaves time for another.
    #[must_use]
    pub fn grace_seconds(&self) -> u64 {
        (self.duration.as_secs() / 3).max(1)
    }

    /// The longest hand-over after the leader stops gracefully (SIGTERM, as
    /// a pod deletion sends), from the signal to the new leader's
    /// `acquireTime`: the leader clears the Lease before it exits and the
    /// follower's watch sees it at once, so only requests remain. When the
    /// release cannot be written (apiserver unreachable) or the follower's
    /// watch is down, [`Self::crashed_handover`] applies instead.
    #[must_use]
    pub fn released_handover(&self) -> Duration {
        REQUEST_ALLOWANCE
    }

    /// When, after a crashed leader's last renewal (its `renewTime`), a
    /// follower becomes the holder (its `acquireTime`). Not sooner than the
    /// duration: no Lease protocol can tell a dead leader from a slow one
    /// before its Lease expires. Not later than the duration plus the
    /// crate's [`TAKEOVER_JITTER`] and [`REQUEST_ALLOWANCE`]: the follower
    /// sleeps exactly until the expiry it read, then clears and locks.
    /// Measured from the crash instead, the upper end holds as well (the
    /// last renewal is never after the crash) and the hand-over is shorter
    /// by the age of that renewal, up to two thirds of the duration.
    /// Both ends assume the replicas' clocks agree: the follower compares
    /// the leader's `renewTime` with its own clock, as client-go does not.
    #[must_use]
    pub fn crashed_handover(&self) -> RangeInclusive<Duration> {
        self.duration..=self.duration + TAKEOVER_JITTER + REQUEST_ALLOWANCE
    }
}

/// Why the election could not start or end cleanly.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error(
        "the Lease {lease}: the duration must be whole seconds, at least 2s, not {duration:?}"
    )]
    Duration { lease: String, duration: Duration },
    #[error("the Lease {lease}: {source}")]
    Manager {
        lease: String,
        #[source]
        source: LeaseManagerError,
    },
    #[error("the Lease {lease}: releasing it: {source}")]
    Release {
        lease: String,
        #[source]
        source: kube::Error,
    },
    #[error("the Lease {lease}: not released within {after:?}; it expires on its own")]
    ReleaseTimeout { lease: String, after: Duration },
    #[error("the Lease {lease}: the election task failed: {source}")]
    Task {
        lease: String,
        #[source]
        source: tokio::task::JoinError,
    },
}

/// This replica's part in the election: whether it leads, and the way out.
/// Dropping it without [`Self::release`] stops the election and leaves the
/// Lease to expire, as a crash would.
pub struct Leadership {
    lease: String,
    duration: Duration,
    leading: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), LeaderError>>>,
}

/// Starts competing for the Lease of `config` as `identity` (unique among
/// the replicas: the pod name), creating the Lease when it is missing.
/// Returns at once, not leading; [`Leadership::leading`] says when that
/// changes.
///
/// # Errors
/// When the duration is not one [`LeaseConfig::duration_seconds`] takes, or
/// the Lease cannot be read or created: later failures are retried.
pub async fn elect(
    client: Client,
    config: &LeaseConfig,
    identity: &str,
) -> Result<Leadership, LeaderError> {
    let seconds = config.duration_seconds()?;
    let first = manager(&client, config, identity).await?;
    let (publish, leading) = watch::channel(false);
    let (stop, stopped) = oneshot::channel();
    let campaign = campaign::Campaign {
        client,
        config: config.clone(),
        identity: identity.to_owned(),
        publish,
    };
    tracing::info!(lease = %config.lease(), %identity, duration_seconds = seconds, "competing for the Lease");
    Ok(Leadership {
        lease: config.lease(),
        duration: config.duration,
        leading,
        stop: Some(stop),
        task: Some(tokio::spawn(campaign.run(first, stopped))),
    })
}

/// A crate manager for `config`; reads (or creates) the Lease.
async fn manager(
    client: &Client,
    config: &LeaseConfig,
    identity: &str,
) -> Result<LeaseManager, LeaderError> {
    LeaseManagerBuilder::new(client.clone(), &config.name)
        .with_namespace(&config.namespace)
        .with_identity(identity)
        .with_duration(config.duration_seconds()?)
        .with_grace(config.grace_seconds())
        .build()
        .await
        .map_err(|source| LeaderError::Manager {
            lease: config.lease(),
            source,
        })
}

impl Leadership {
    /// Whether this replica leads, now and as it changes. Writers check it
    /// before each write: it turns false before the Lease can pass to
    /// another replica. Closed once the election has ended.
    #[must_use]
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Whether this replica leads now.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// `namespace/name`.
    #[must_use]
    pub fn lease(&self) -> &str {
        &self.lease
    }

    /// Mirrors [`Self::leading`] into `nodescope_leader{lease}` of
    /// `metrics` (1 leading, 0 not) until the election ends, which sets 0.
    pub fn export(&self, metrics: &LeaderMetrics) -> JoinHandle<()> {
        let mut leading = self.leading.clone();
        let metrics = metrics.clone();
        let lease = self.lease.clone();
        tokio::spawn(async move {
            loop {
                metrics.leader(&lease, *leading.borrow_and_update());
                if leading.changed().await.is_err() {
                    metrics.leader(&lease, false);
                    return;
                }
            }
        })
    }

    /// Stops leading and competing, and clears the Lease if this replica
    /// holds it, so that a follower takes over within
    /// [`LeaseConfig::released_handover`] instead of waiting for expiry.
    /// Call it once the writing has stopped. Gives up after the Lease
    /// duration, when the Lease would have expired anyway.
    ///
    /// # Errors
    /// When the release was not written: the Lease then expires on its own.
    pub async fn release(mut self) -> Result<(), LeaderError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(mut task) = self.task.take() else {
            return Ok(());
        };
        match tokio::time::timeout(self.duration, &mut task).await {
            Ok(Ok(result)) => result,
            Ok(Err(source)) => Err(LeaderError::Task {
                lease: self.lease.clone(),
                source,
            }),
            Err(_) => {
                task.abort();
                Err(LeaderError::ReleaseTimeout {
                    lease: self.lease.clone(),
                    after: self.duration,
                })
            }
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(duration: Duration) -> LeaseConfig {
        LeaseConfig {
            namespace: "nodescope-system".to_owned(),
            name: "nodescope-features".to_owned(),
            duration,
        }
    }

    #[tokio::test]
    async fn the_gauge_follows_the_election_and_reads_zero_once_it_ended() {
        let (publish, leading) = watch::channel(false);
        let leadership = Leadership {
            lease: "nodescope-system/nodescope-features".to_owned(),
            duration: Duration::from_secs(3),
            leading,
            stop: None,
            task: None,
        };
        let metrics =
            crate::features::metrics::FeaturesMetrics::new("nodescope-system/nodescope-features");
        let exported = leadership.export(&metrics.leader);
        let gauge = |metrics: &crate::features::metrics::FeaturesMetrics| {
            metrics
                .render()
                .lines()
                .find_map(|l| {
                    l.strip_prefix(
                        "nodescope_leader{lease=\"nodescope-system/nodescope-features\"} ",
                    )
                    .map(str::to_owned)
                })
                .unwrap_or_default()
        };
        let settled = |want: &'static str| {
            let metrics = metrics.clone();
            async move {
                for _ in 0..100 {
                    if gauge(&metrics) == want {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                false
            }
        };
        assert!(settled("0").await, "{}", metrics.render());
        publish.send_replace(true);
        assert!(settled("1").await, "{}", metrics.render());
        drop((publish, leadership));
        assert!(exported.await.is_ok());
        assert_eq!(gauge(&metrics), "0");
    }

    #[test]
    fn the_duration_is_whole_seconds_from_two() {
        assert_eq!(
            config(Duration::from_secs(15)).duration_seconds().ok(),
            Some(15)
        );
        assert_eq!(
            config(Duration::from_secs(2)).duration_seconds().ok(),
            Some(2)
        );
        for bad in [
            Duration::from_secs(1),
            Duration::from_millis(2500),
            Duration::ZERO,
        ] {
            let error = config(bad).duration_seconds().err().map(|e| e.to_string());
            assert_eq!(
                error.as_deref(),
                Some(format!("the Lease nodescope-system/nodescope-features: the duration must be whole seconds, at least 2s, not {bad:?}").as_str())
            );
        }
    }

    #[test]
    fn the_leader_renews_a_third_of_the_duration_before_expiry_and_at_least_a_second() {
        let grace = |s| config(Duration::from_secs(s)).grace_seconds();
        assert_eq!(
            [grace(2), grace(3), grace(5), grace(15), grace(30)],
            [1, 1, 1, 5, 10]
        );
    }

    #[test]
    fn a_released_lease_passes_within_the_request_allowance_and_a_crashed_one_after_its_duration_plus_jitter(
    ) {
        let lease = config(Duration::from_secs(3));
        assert_eq!(lease.released_handover(), Duration::from_secs(1));
        assert_eq!(
            lease.crashed_handover(),
            Duration::from_secs(3)..=Duration::from_secs(5)
        );
        assert_eq!(
            config(Duration::from_secs(15)).crashed_handover(),
            Duration::from_secs(15)..=Duration::from_secs(17)
        );
    }
}
