//! The webhook's status Lease: each `serve` replica that is ready renews a
//! coordination.k8s.io Lease, and the updater evicts only while that Lease
//! is fresh, as upstream VPA's admission controller and updater do
//! (`vertical-pod-autoscaler/pkg/utils/status`).
//!
//! Owns: what a renewal writes and when a Lease still vouches for the
//! webhook. Must not: elect anyone. Every replica writes the same Lease;
//! the holder is whichever renewed last, and that is all it says. The
//! renewing loop is [`renew`].

pub mod renew;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// `--status-lease-name` of `serve` and
/// `--admission-controller-status-lease-name` of `update`.
pub const DEFAULT_LEASE_NAME: &str = "nodescope-webhook";

/// `spec.leaseDurationSeconds` written on every renewal. Informational:
/// readers judge freshness by their own timeout
/// (`--admission-controller-status-lease-timeout`, 1m, upstream's), and
/// this says the same to a person reading the Lease.
pub const LEASE_DURATION_SECONDS: i32 = 60;

/// Whether a status Lease last renewed at `renew_time` still vouches for a
/// live webhook at `now`: renewed less than `timeout` ago. No renewal time
/// is never fresh.
///
/// Upstream's updater also counts a Lease younger than the timeout as
/// fresh by its `creationTimestamp`, because upstream creates the Lease
/// without a renewal time. nodescope writes `renewTime` on creation too, so
/// a Lease without one was made by someone else and proves nothing. A
/// renewal time ahead of `now` (clocks that disagree) counts as fresh, as
/// upstream counts it; keep the replicas' clocks in step (NTP).
#[must_use]
pub fn lease_is_fresh(renew_time: Option<SystemTime>, now: SystemTime, timeout: Duration) -> bool {
    renew_time
        .and_then(|renewed| renewed.checked_add(timeout))
        .is_some_and(|until| until > now)
}

/// `spec.renewTime` of `lease`, for [`lease_is_fresh`].
#[must_use]
pub fn renew_time(lease: &Lease) -> Option<SystemTime> {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.renew_time.as_ref())
        .map(|renewed| SystemTime::from(renewed.0))
}

/// Where the replicas publish that they serve, and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusLease {
    pub namespace: String,
    pub name: String,
    /// This replica: the pod name. Written as `holderIdentity`, so the
    /// Lease names the replica that renewed it last.
    pub identity: String,
}

impl StatusLease {
    /// `namespace/name`, as logs name it.
    #[must_use]
    pub fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The Lease to write at `now`: `current` (as read, its
    /// resourceVersion kept so the write is refused if another replica
    /// wrote first) with this replica's holder, renewal time and duration,
    /// or a new Lease when there is none. Everything else `current` holds
    /// (labels, annotations, `acquireTime`) is left as it is.
    #[must_use]
    pub fn renewed(&self, current: Option<&Lease>, now: SystemTime) -> Lease {
        let mut lease = current.cloned().unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([
                    ("app.kubernetes.io/name".to_owned(), "nodescope".to_owned()),
                    (
                        "app.kubernetes.io/component".to_owned(),
                        "webhook".to_owned(),
                    ),
                ])),
                ..ObjectMeta::default()
            },
            spec: None,
        });
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.identity.clone());
        spec.renew_time = Timestamp::try_from(now).ok().map(MicroTime);
        spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
        lease
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SystemTime {
        text.parse::<Timestamp>()
            .map(SystemTime::from)
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    fn status() -> StatusLease {
        StatusLease {
            namespace: "nodescope-system".to_owned(),
            name: DEFAULT_LEASE_NAME.to_owned(),
            identity: "nodescope-7d9f-abcde".to_owned(),
        }
    }

    #[test]
    fn a_lease_is_fresh_until_the_timeout_has_passed_since_its_renewal() {
        let renewed = Some(at("2026-05-01T10:00:00Z"));
        let minute = Duration::from_secs(60);
        assert!(lease_is_fresh(renewed, at("2026-05-01T10:00:00Z"), minute));
        assert!(lease_is_fresh(
            renewed,
            at("2026-05-01T10:00:59.999999Z"),
            minute
        ));
        // Upstream's isStatusValid: renewTime + timeout must be after now.
        assert!(!lease_is_fresh(renewed, at("2026-05-01T10:01:00Z"), minute));
        assert!(!lease_is_fresh(renewed, at("2026-05-01T11:00:00Z"), minute));
    }

    #[test]
    fn a_lease_without_a_renewal_time_is_never_fresh() {
        assert!(!lease_is_fresh(
            None,
            at("2026-05-01T10:00:00Z"),
            Duration::from_secs(60)
        ));
        assert_eq!(renew_time(&Lease::default()), None);
    }

    #[test]
    fn a_renewal_ahead_of_the_readers_clock_counts_as_fresh_as_upstream_counts_it() {
        assert!(lease_is_fresh(
            Some(at("2026-05-01T10:05:00Z")),
            at("2026-05-01T10:00:00Z"),
            Duration::from_secs(60)
        ));
    }

    #[test]
    fn a_timeout_past_the_end_of_time_is_not_fresh_rather_than_a_panic() {
        assert!(!lease_is_fresh(
            Some(at("2026-05-01T10:00:00Z")),
            at("2026-05-01T10:00:00Z"),
            Duration::MAX
        ));
    }

    #[test]
    fn a_first_renewal_creates_the_lease_with_holder_renewal_time_and_duration() {
        let now = at("2026-05-01T10:00:00.250000Z");
        let lease = status().renewed(None, now);
        assert_eq!(lease.metadata.name.as_deref(), Some("nodescope-webhook"));
        assert_eq!(
            lease.metadata.namespace.as_deref(),
            Some("nodescope-system")
        );
        assert_eq!(lease.metadata.resource_version, None);
        let spec = lease.spec.clone().unwrap_or_default();
        assert_eq!(
            spec.holder_identity.as_deref(),
            Some("nodescope-7d9f-abcde")
        );
        assert_eq!(spec.lease_duration_seconds, Some(60));
        assert_eq!(renew_time(&lease), Some(now));
        assert!(lease_is_fresh(
            renew_time(&lease),
            now,
            Duration::from_secs(60)
        ));
    }

    #[test]
    fn a_renewal_keeps_the_resource_version_it_read_and_takes_over_the_holder() {
        let before = status().renewed(None, at("2026-05-01T10:00:00Z"));
        let mut read = before.clone();
        read.metadata.resource_version = Some("812".to_owned());
        if let Some(spec) = read.spec.as_mut() {
            spec.holder_identity = Some("nodescope-7d9f-other".to_owned());
            spec.acquire_time = Some(MicroTime(Timestamp::UNIX_EPOCH));
        }
        let now = at("2026-05-01T10:00:10Z");
        let lease = status().renewed(Some(&read), now);
        assert_eq!(lease.metadata.resource_version.as_deref(), Some("812"));
        assert_eq!(lease.metadata.labels, before.metadata.labels);
        let spec = lease.spec.clone().unwrap_or_default();
        assert_eq!(
            spec.holder_identity.as_deref(),
            Some("nodescope-7d9f-abcde")
        );
        // Left as another writer set it.
        assert_eq!(spec.acquire_time, Some(MicroTime(Timestamp::UNIX_EPOCH)));
        assert_eq!(renew_time(&lease), Some(now));
    }

    #[test]
    fn the_lease_is_named_namespace_slash_name() {
        assert_eq!(status().lease(), "nodescope-system/nodescope-webhook");
    }
}
